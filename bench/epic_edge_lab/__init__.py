"""epic-edge's lab: judged sets, quality, stream and scaling benches, studies, verifier learning."""

from pathlib import Path

# The lab runs from its checkout (pip install -e bench): its data and results sit beside the code.
LAB_ROOT = Path(__file__).resolve().parent.parent
JUDGED = LAB_ROOT / "judged"  # the judged question sets (PrefWiki's, and one folder per set)
LABELS = LAB_ROOT / "labels"  # the labelled (preference, passage) pairs of the verifier study
PERSONAL = LAB_ROOT / "personal" / "personas"  # the personal-stream set (bench/personal/)
RESULTS = LAB_ROOT / "results"  # saved runs the figures in BENCHMARKS.md and docs/ come from
