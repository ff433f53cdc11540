"""Oracle replay: what a perfect answer finder, or perfect preference knowledge, would buy.

Where the *both* target's wall stands, measured on a saved run's recorded memories: each
question's entries are ranked as the profile ranks them, then with the judges' own labels
lifted into the ranking. `answers+B` adds B x (judged answers) to the profile's score in
standard units (per question), as an answer finder of that strength would; `aligned` and
`both` put the judged aligned or *both* passages first. Unjudged passages count as misses.
The labels rank here, so these are bounds, never quality figures.

    python -m epic_edge_lab.oracle_replay bench/results/quality.json \\
        [--lift 0.25,0.5,1,2] [--judged DIR] [--json OUT]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from epic_edge_lab import relevance
from epic_edge_lab.recorded import RecordedRun, read_run, replay_parser, report, score
from epic_edge_lab.variants import distinct_top
from epic_edge_lab.verification import roc_auc

LIFTS = (0.25, 0.5, 1.0, 2.0)
FIRST = 1e3  # a lift no score difference overcomes: the labelled passages rank first


def replay(run: dict[str, Any], lifts: tuple[float, ...] = LIFTS, root: Path | None = None,
           models: Path | None = None) -> dict[str, Any]:
    """Every question's top k as the profile ranks it, and under each oracle; with the mean
    per-question AUC of its answering entries under each answers lift."""
    recorded = RecordedRun(run, root, models)
    labels = relevance.primary_labels(relevance.load_judgments(root))
    names = ["profile", *(f"answers+{b:g}" for b in lifts), "aligned", "both"]
    retrieved: dict[str, dict[str, list[str]]] = {}
    aucs: dict[str, dict[str, list[float]]] = {}
    for memory in recorded.memories():
        for q in recorded.questions(memory):
            base = memory.scores(recorded.embedder.embed([q.question])[0], q.question,
                                 recorded.setting)
            z = (base - base.mean()) / max(float(base.std()), 1e-9)
            found = [labels.get((q.qid, pid), (0, 0)) for pid in memory.pids]
            answers = np.array([a for a, _ in found], bool)
            aligned = np.array([b for _, b in found], bool)
            tries = [z, *(z + b * answers for b in lifts), z + FIRST * aligned,
                     z + FIRST * (answers & aligned)]
            retrieved[q.qid] = {name: [memory.pids[i] for i in distinct_top(
                memory.pids, s, recorded.k)] for name, s in zip(names, tries)}
            if 0 < answers.sum() < len(answers):  # AUC needs both kinds of entry
                for name, s in zip(names[:len(lifts) + 1], tries):
                    aucs.setdefault(q.split, {}).setdefault(name, []).append(roc_auc(s, answers))
    return {"bench": "oracle_replay", "profile": run["profile"], "corpus": run["corpus"],
            "judged_set": str(root) if root else None, "k": recorded.k, "tries": names,
            "answers_auc": {split: {n: float(np.mean(v)) for n, v in by.items()}
                            for split, by in aucs.items()},
            "retrieved": retrieved, "splits": score(retrieved, names, root)}


def main(argv: list[str] | None = None) -> int:
    p = replay_parser("oracle_replay", __doc__)
    p.add_argument("--lift", default=",".join(f"{b:g}" for b in LIFTS), metavar="B1,B2",
                   help="answers lifts to try, in standard units of the score")
    args = p.parse_args(argv)
    try:
        lifts = tuple(float(b) for b in args.lift.split(","))
    except ValueError:
        raise SystemExit(f"--lift {args.lift!r}: expected numbers, e.g. 0.25,0.5") from None
    if any(b <= 0 for b in lifts):
        raise SystemExit("--lift: every lift must be above 0")
    result = replay(read_run(args.run), lifts, args.judged, args.models)
    return report(result, args.json, *(
        f"{split}: mean per-question AUC of the answering entries " + ", ".join(
            f"{name} {auc:.3f}" for name, auc in by.items())
        for split, by in sorted(result["answers_auc"].items())))

if __name__ == "__main__":
    raise SystemExit(main())
