"""How the shipped learner grows with labelled data: trained on shares of train, scored on tests.

The shipped learner (bench/labels/learned_default.json) is trained on 1/8, 2/8,
4/8 and 8/8 of the train preferences (folds by preference: all pairs of a preference in one
fold), and every test split is scored: ROC AUC, and F1 at the threshold best for that
split (an upper bound on F1 at a threshold fitted on train). A line through AUC and F1
against log2(pairs) says how many pairs of the same kind a target would take, if the trend held.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge_lab.calibrate import LabelledPair, best_f1_threshold, keep_metrics
from epic_edge_lab.verifier.cv import preference_folds

from . import common
from .verification import roc_auc

FOLDS = 8
SHARES = (1, 2, 4, 8)        # folds of FOLDS trained on
FIT_LAST = 3                 # the line is fitted on the largest shares (the first gains most)
BEYOND = 1000                # a line that needs more than this many times the pairs: "beyond"
TARGETS = {"test": {"roc_auc": 0.93, "f1": 0.85}, "test_style": {"f1": 0.80}}


def run_curve(splits: dict[str, list[LabelledPair]], fit: Callable[[list[LabelledPair]], Any],
              score: Callable[[Any, list[LabelledPair]], np.ndarray],
              shares: Sequence[int] = SHARES, log: Callable[[str], None] = print
              ) -> list[dict[str, Any]]:
    """One row per share: train pairs, seconds, and per test split its AUC and best F1."""
    train = splits["train"]
    folds = preference_folds(train, FOLDS)
    rows = []
    for share in shares:
        subset = [p for p, f in zip(train, folds) if f < share]
        start = time.perf_counter()
        model = fit(subset)
        row: dict[str, Any] = {"share": f"{share}/{FOLDS}", "pairs": len(subset), "splits": {}}
        for name, pairs in splits.items():
            if name == "train":
                continue
            labels = np.array([p.keep for p in pairs], dtype=bool)
            scores = np.asarray(score(model, pairs), dtype=float)
            best = keep_metrics(labels, scores >= best_f1_threshold(scores, labels))["f1"]
            row["splits"][name] = {"roc_auc": roc_auc(scores, labels), "f1": best}
        row["seconds"] = round(time.perf_counter() - start)
        log(f"{row['share']} of train ({len(subset)} pairs): " + ", ".join(
            f"{n} AUC {m['roc_auc']:.3f} F1 {m['f1']:.3f}" for n, m in row["splits"].items()))
        rows.append(row)
    return rows


def pairs_needed(rows: Sequence[dict[str, Any]], split: str, metric: str, target: float
                 ) -> dict[str, float | None]:
    """The least-squares gain per doubling of pairs over the FIT_LAST largest shares, and the
    pairs that line reaches `target` at (None when it needs more than BEYOND times the most
    pairs trained on, or never gets there)."""
    fitted = rows[-FIT_LAST:]
    x = np.log2([r["pairs"] for r in fitted])
    y = np.array([r["splits"][split][metric] for r in fitted])
    slope, intercept = np.polyfit(x, y, 1)
    doublings = (target - intercept) / slope - x[-1] if slope > 0 else math.inf
    needed = 2 ** (x[-1] + doublings) if doublings <= math.log2(BEYOND) else None
    return {"per_doubling": float(slope), "pairs": None if needed is None else float(needed)}


def summary(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"split": split, "metric": metric, "target": target,
             **pairs_needed(rows, split, metric, target)}
            for split, targets in TARGETS.items() if split in rows[0]["splits"]
            for metric, target in targets.items()]


def section(out: Path) -> list[str]:
    """The BENCHMARKS section, when this study left bench/results/verification_data_curve.json."""
    path = out / "verification_data_curve.json"
    if not path.exists():
        return []
    result = json.loads(path.read_text(encoding="utf-8"))
    names = list(result["rows"][0]["splits"])
    table = [[r["share"], str(r["pairs"]),
              *(f"{r['splits'][n]['roc_auc']:.3f} / {r['splits'][n]['f1']:.3f}" for n in names),
              str(r["seconds"])] for r in result["rows"]]
    lines = ["### The shipped learner against the amount of labelled data "
             "(`python -m epic_edge_lab.verification_data_curve`)", "",
             f"{result['learner']}, trained on a share of the train preferences; each cell is "
             "ROC AUC / F1 at the split's best threshold (an upper bound).", "",
             common.table(table, ["share of train", "pairs", *names, "seconds"]), ""]
    for s in summary(result["rows"]):
        reach = (f"more than {BEYOND:,}x the pairs, if ever" if s["pairs"] is None
                 else f"about {s['pairs']:,.0f} pairs of the same kind "
                      f"({s['pairs'] / result['rows'][-1]['pairs']:.0f}x)")
        lines.append(f"- {s['split']} {s['metric']} {s['target']}: {s['per_doubling']:+.3f} per "
                     f"doubling of the pairs (the {FIT_LAST} largest shares); reached at {reach}")
    return [*lines, ""]


def main(argv: list[str] | None = None) -> int:
    from epic_edge_lab.verifier.default import choice_path, load_choice
    from epic_edge_lab.verifier.learners import LearnerSpec, Workbench, fit, score

    from .verification_learners import load_splits

    p = argparse.ArgumentParser(prog="python -m epic_edge_lab.verification_data_curve",
                                description=__doc__)
    p.add_argument("--threads", type=int, default=2, help="torch threads")
    p.add_argument("--json", type=Path, default=Path("bench/results/verification_data_curve.json"))
    args = p.parse_args(argv)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    spec = LearnerSpec(**load_choice()["learner"])
    bench = Workbench(threads=args.threads)
    splits = load_splits(choice_path().parent, log=log)
    rows = run_curve(splits, lambda pairs: fit(spec, pairs, bench, log=lambda _: None),
                     lambda model, pairs: score(model, pairs, bench), log=log)
    result = {"bench": "verification_data_curve", "learner": spec.name, "folds": FOLDS,
              "rows": rows, "machine": common.machine()}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print("\n".join(section(args.json.parent)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
