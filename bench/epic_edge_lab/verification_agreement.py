"""How far careful readers get on the labelled set: independent relabels against its labels.

    python -m epic_edge_lab.verification_agreement [--models DIR]

bench/labels/relabels.jsonl holds blind relabels of the held-out style's 377
pairs and of 400 test pairs drawn at random (seeded), each pair relabelled twice by different
readers following LABELLING.md (README there: *Relabels*). Each pass is scored as if it were a
verifier, against the set's labels: Cohen's kappa, precision, recall, F1 of Keep. Beside it,
the shipped learned decision on the same pairs at its threshold: how far the model stands from
a reader, and whether a target lies above what readers reach (then the labels, not the
model, would be the wall).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from epic_edge.errors import EpicEdgeError
from epic_edge_lab.calibrate import keep_metrics, load_verification_set

from . import common
from .judged_metrics import cohen_kappa

FILE = "relabels.jsonl"
OUT = "verification_agreement.json"
SPLITS = ("test", "test_style")


def load_relabels(folder: Path) -> dict[int, dict[int, bool]]:
    """pass -> {pair id: Keep?} from the relabels file."""
    passes: dict[int, dict[int, bool]] = defaultdict(dict)
    for line in (folder / FILE).read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            passes[int(row["pass"])][int(row["id"])] = row["label"] == "Keep"
    return dict(passes)


def rows_for(labels: dict[int, bool], passes: dict[int, dict[int, bool]],
             model: dict[int, bool]) -> list[dict[str, Any]]:
    """One row per relabel pass and one for the model, on the pairs every pass relabelled."""
    ids = sorted(set.intersection(*(set(p) for p in passes.values())) & set(labels))
    truth = [labels[i] for i in ids]
    out = []
    for name, given in [*((f"reader pass {k}", v) for k, v in sorted(passes.items())),
                        ("shipped learned decision", model)]:
        guess = [given[i] for i in ids]
        m = keep_metrics(truth, guess)
        out.append({"who": name, "pairs": len(ids), "keep": int(sum(guess)),
                    "set_keep": int(sum(truth)),
                    "kappa": round(cohen_kappa([int(x) for x in truth], [int(x) for x in guess]),
                                   3),
                    **{k: round(m[k], 3) for k in ("precision", "recall", "f1")}})
    return out


def run(models: Path | None = None, log: Any = print) -> dict[str, Any]:
    from epic_edge.backends.learned_verifier import LearnedVerifier
    from epic_edge.models import model_dir
    from epic_edge_lab.calibrate import _data_dir

    folder = _data_dir()
    passes = load_relabels(folder)
    verifier = LearnedVerifier((models or model_dir()) / "epic-verifier-minilm" / "model.onnx")
    result: dict[str, Any] = {"bench": "verification_agreement", "threshold": verifier.threshold,
                              "splits": {}}
    for split in SPLITS:
        pairs = [p for p in load_verification_set("all", folder / f"{split}.jsonl")
                 if all(p.id in given for given in passes.values())]
        scores = verifier.score_pairs([p.preference for p in pairs], [p.passage for p in pairs])
        model = {p.id: bool(s >= verifier.threshold) for p, s in zip(pairs, scores)}
        result["splits"][split] = rows_for({p.id: p.keep for p in pairs}, passes, model)
        log(f"{split}: {len(pairs)} pairs relabelled by every pass")
    first, second = (passes[k] for k in sorted(passes)[:2])
    both = sorted(set(first) & set(second))
    result["readers_kappa"] = round(cohen_kappa([int(first[i]) for i in both],
                                                [int(second[i]) for i in both]), 3)
    return result


def section(out: Path) -> list[str]:
    """The BENCHMARKS section, when this bench left bench/results/verification_agreement.json."""
    path = out / OUT
    if not path.exists():
        return []
    result = json.loads(path.read_text(encoding="utf-8"))
    table = [[split, r["who"], str(r["pairs"]), f"{r['keep']} / {r['set_keep']}",
              f"{r['kappa']:.3f}", f"{r['precision']:.3f}", f"{r['recall']:.3f}",
              f"{r['f1']:.3f}"] for split, rows in result["splits"].items() for r in rows]
    return ["### Readers against the labels (`python -m epic_edge_lab.verification_agreement`)",
            "", "Blind relabels of the held-out style and of 400 test pairs, each pair twice by "
            "different readers, scored against the set's labels like a verifier; the shipped "
            f"learned decision at its threshold ({result['threshold']:.3f}) on the same pairs. "
            f"The two passes agree with each other at kappa {result['readers_kappa']:.3f}.", "",
            common.table(table, ["split", "who", "pairs", "Keep (who / set)", "kappa vs set",
                                 "precision", "recall", "F1"]), ""]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m epic_edge_lab.verification_agreement",
                                description=__doc__.splitlines()[0])
    p.add_argument("--models", type=Path, default=None, help="models folder (default: setup's)")
    p.add_argument("--out", type=Path, default=Path("bench/results") / OUT)
    args = p.parse_args(argv)
    try:
        result = run(args.models, log=lambda m: print(m, file=sys.stderr))
    except EpicEdgeError as exc:  # no verifier model, or a malformed set file
        p.error(str(exc))
    common.write_json(result, args.out)
    print("\n".join(section(args.out.parent)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
