"""Quality against budget: saved `bench quality` runs at several byte budgets, and the personal
figures per budget, in one table (BENCHMARKS.md, *Quality against budget*).

    python -m epic_edge_lab.budget_curve 0.1MB=q-0.1.json 0.4MB=q-0.4.json:replay-0.4.json \\
        --personal personal-budgets.json --note "what the runs were" --json budget-curve.json

A run given as RUN:REPLAY takes EPIC's lists from a settings replay of it (its `--set` try
named by --replay-try), for a run made before the shipped ranking: the same memories, ranked
as the profile ranks them now. Each budget is also compared with the one given before it
(`steps`: EPIC's paired difference per split and axis, what the larger budget adds).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge_lab import common
from epic_edge_lab.recorded import score

SYSTEMS = ("store-everything", "coarse+fine", "epic")
AXES = ("aligned", "answers", "both", "unjudged")


def point(run_path: Path, replay: Path | None, replay_try: str) -> dict[str, Any]:
    """One budget's judged figures per split: each system's, and EPIC's paired margins."""
    return judged_point(run_path, replay, *read_lists(run_path, replay, replay_try))


def read_lists(run_path: Path, replay: Path | None, replay_try: str
               ) -> tuple[dict[str, Any], dict[str, dict[str, list[str]]]]:
    """A saved run and its lists per question, EPIC's from `replay`'s `replay_try` when given."""
    run = json.loads(run_path.read_text(encoding="utf-8"))
    lists = {qid: dict(found) for qid, found in run["retrieved"].items()}
    if replay is not None:
        for qid, found in json.loads(replay.read_text(encoding="utf-8"))["retrieved"].items():
            lists[qid]["epic"] = found[replay_try]
    return run, lists


def judged_point(run_path: Path, replay: Path | None, run: dict[str, Any],
                 lists: dict[str, dict[str, list[str]]]) -> dict[str, Any]:
    """point() of a run read already."""
    scored = score(lists, list(SYSTEMS), None)
    bytes_median = float(np.median([p["systems"]["epic"]["bytes"] for p in run["per_persona"]]))
    return {"run": run_path.name, "epic_from": replay.name if replay else "run",
            "mb_median": bytes_median / 1e6,
            **{split: {name: {**{a: cell[name][a] for a in AXES},
                              "vs_se": {a: cell[name][f"{a}_vs_first"] for a in AXES[:3]}}
                       for name in SYSTEMS} for split, cell in scored.items()}}


def steps(epic: dict[str, dict[str, list[str]]]) -> dict[str, Any]:
    """What each budget adds to the one before it (points in the order given): per split and
    axis, EPIC's paired difference over the questions both ran, [mean, low, high] of its 95%
    interval."""
    names, out = list(epic), {}
    for smaller, larger in zip(names, names[1:]):
        both = sorted(set(epic[smaller]) & set(epic[larger]))
        scored = score({q: {smaller: epic[smaller][q], larger: epic[larger][q]} for q in both},
                       [smaller, larger], None)
        out[f"{smaller} -> {larger}"] = {split: {a: cell[larger][f"{a}_vs_first"]
                                                 for a in AXES[:3]}
                                         for split, cell in scored.items()}
    return out


def personal_row(result: dict[str, Any], budget: str) -> dict[str, float]:
    """The personal dev figures of one budget of a `bench personal` run."""
    s = result["per_budget"][budget]["summary"]
    pref = s["recall"]["preference"]
    return {"keep_recall": s["keep"]["keep_recall"]["mean"],
            "keep_precision": s["keep"]["keep_precision"]["mean"],
            "epic": pref["epic"]["mean"], "store_everything": pref["store-everything"]["mean"],
            "recency": pref["recency"]["mean"], "random": pref["random"]["mean"]}


def section(out: Path) -> list[str]:
    """BENCHMARKS.md's table, when out/budget-curve.json exists."""
    path = out / "budget-curve.json"
    if not path.exists():
        return []
    curve = json.loads(path.read_text(encoding="utf-8"))
    rows = []
    for name, p in curve["points"].items():
        for split in ("dev", "test"):
            e = p[split]["epic"]
            margins = " / ".join(f"{e['vs_se'][a][0]:+.3f}" for a in AXES[:3])
            personal = curve.get("personal", {}).get(name)
            rows.append([name, split, f"{p['mb_median']:.2f}",
                         *(f"{e[a]:.3f}" for a in AXES[:3]), margins,
                         f"{p[split]['coarse+fine']['aligned']:.3f} / "
                         f"{p[split]['coarse+fine']['answers']:.3f}",
                         f"{e['unjudged']:.1%}", p["epic_from"],
                         (f"{personal['keep_recall']:.2f} at {personal['keep_precision']:.2f}; "
                          f"{personal['epic']:.3f} vs {personal['store_everything']:.3f}"
                          + (f"; buffers {personal['recency']:.3f} / {personal['random']:.3f}"
                             if "random" in personal else ""))
                         if personal and split == "dev" else "",
                         _buffers(p.get("buffers", {}).get(split))])
    head = ["budget", "split", "MB (median)", "EPIC aligned", "answers", "both",
            "EPIC minus SE (aligned / answers / both)", "coarse + fine aligned / answers",
            "unjudged", "EPIC lists from", "personal dev: keep recall at precision; top-5 "
                                           "(pref Qs) vs SE; recency / random buffer",
            "equal-size recency; random buffer (aligned / answers / both, estimated)"]
    return ["### Quality against budget (`python -m epic_edge_lab.budget_curve`)", "",
            curve.get("note", ""), "", common.table(rows, head), ""]


def _buffers(found: dict[str, Any] | None) -> str:
    """"0.030 / 0.012 / 0.006; 0.031 / ..." from an epic_edge_lab.buffers estimate."""
    if not found:
        return ""
    return "; ".join(" / ".join(f"{found[name][a]['estimate']:.3f}" for a in AXES[:3])
                     for name in ("recency", "random"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="budget_curve", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("points", nargs="+", help="NAME=RUN.json or NAME=RUN.json:REPLAY.json")
    p.add_argument("--replay-try", default="no_steering_from=0.4",
                   help="the replay's try that is the shipped ranking")
    p.add_argument("--personal", type=Path, default=None,
                   help="a `bench personal --budgets ...` run whose budgets are the points'")
    p.add_argument("--buffers", action="append", default=[], metavar="NAME:SPLIT=EST.json",
                   help="a point's equal-size buffers on one split, estimated by "
                        "`python -m epic_edge_lab.buffers estimate` (repeatable)")
    p.add_argument("--note", default="",
                   help="what the runs were, printed above the table in BENCHMARKS.md")
    p.add_argument("--json", type=Path, required=True)
    args = p.parse_args(argv)
    points, personal, epic = {}, {}, {}
    extra = json.loads(args.personal.read_text(encoding="utf-8")) if args.personal else None
    for spec in args.points:
        name, _, paths = spec.partition("=")
        run, _, replay = paths.partition(":")
        files = [Path(f) for f in (run, replay) if f]
        if not re.fullmatch(r"\d+(\.\d+)?MB", name) or not run:
            p.error(f"bad point {spec!r}: use NAME=RUN.json[:REPLAY.json], NAME like 0.4MB")
        if missing := [str(f) for f in files if not f.is_file()]:
            p.error(f"no such run file: {', '.join(missing)}")
        replay_path = files[1] if replay else None
        read, lists = read_lists(files[0], replay_path, args.replay_try)
        points[name] = judged_point(files[0], replay_path, read, lists)
        epic[name] = {qid: found["epic"] for qid, found in lists.items()}
        budget = str(int(round(float(name[:-2]) * 1e6)))
        if extra and budget in extra["per_budget"]:
            personal[name] = personal_row(extra, budget)
        print(name, {s: {a: round(points[name][s]["epic"][a], 3) for a in AXES}
                     for s in ("dev", "test")})
    for spec in args.buffers:
        where, _, path = spec.partition("=")
        name, _, split = where.partition(":")
        if name not in points or split not in ("dev", "test") or not Path(path).is_file():
            p.error(f"bad --buffers {spec!r}: use NAME:SPLIT=ESTIMATE.json for a point given")
        points[name].setdefault("buffers", {})[split] = json.loads(
            Path(path).read_text(encoding="utf-8"))
    added = steps(epic)
    for step, figures in added.items():
        print(step, {split: {a: [round(x, 3) for x in v] for a, v in cell.items()}
                     for split, cell in figures.items()})
    args.json.write_text(json.dumps({"points": points, "steps": added, "personal": personal,
                                     "note": args.note}, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
