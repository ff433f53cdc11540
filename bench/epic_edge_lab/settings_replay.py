"""Settings replay: a saved run's memories re-ranked under other [retrieval] weights.

How the ranking settings were chosen on the judged dev split, re-runnable: each recorded
memory (`memory_pids` of a `bench quality --json` run) is ranked as the profile ranks it, then
with one [retrieval] key set to each value given, the others as the profile has them; every
list is scored against the judged set, with a paired interval against the profile's own.

    python -m epic_edge_lab.settings_replay bench/results/quality.json \\
        --set brevity=0,0.1,0.2,0.3 [--set lexical=0.05,0.2] [--judged DIR] [--json OUT]
    epic-edge bench pool --from OUT --out judging/roundN       # its unjudged hits, if any
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from epic_edge_lab.recorded import RecordedRun, read_run, replay_parser, report, score
from epic_edge_lab.variants import distinct_top

# the [retrieval] keys a replay can vary: the evidence weights, and the steering's own
KEYS = ("lexical", "confidence", "brevity", "hedge", "steer_weight", "ease_steering_from",
        "no_steering_from")
STEERING = ("hedge", "steer_weight", "steer_by")


def parse(pairs: list[str]) -> list[tuple[str, float]]:
    """`KEY=V1,V2` arguments as (key, value) settings to try, in order."""
    out = []
    for pair in pairs:
        key, _, values = pair.partition("=")
        if key not in KEYS or not values:
            raise SystemExit(f"--set {pair!r}: expected KEY=V1,V2,... with KEY one of "
                             f"{', '.join(KEYS)}")
        try:
            out += [(key, float(v)) for v in values.split(",")]
        except ValueError:
            raise SystemExit(f"--set {pair!r}: values must be numbers") from None
        if key == "hedge" and any(v <= 0 for k, v in out if k == "hedge"):
            raise SystemExit("--set hedge: a temperature must be above 0")
    return out


def replay(run: dict[str, Any], tries: list[tuple[str, float]], root: Path | None = None,
           models: Path | None = None) -> dict[str, Any]:
    """Every question's top k as the profile ranks it (`profile`), then under each try."""
    recorded = RecordedRun(run, root, models)
    names = ["profile", *(f"{key}={value:g}" for key, value in tries)]
    settings = [dict(recorded.setting), *({**recorded.setting, key: value}
                                         for key, value in tries)]
    # the memories are rebuilt once per steering the tries ask for, each question embedded once
    by_steering: dict[tuple, list[tuple[str, dict[str, Any]]]] = {}
    for name, setting in zip(names, settings):
        by_steering.setdefault(tuple(setting.get(key) for key in STEERING), []).append(
            (name, setting))
    q_vectors = {q.qid: recorded.embedder.embed([q.question])[0] for q in recorded.asked}
    retrieved: dict[str, dict[str, list[str]]] = {}
    for tries_alike in by_steering.values():
        for memory in recorded.memories(tries_alike[0][1]):
            for q in recorded.questions(memory):
                for name, setting in tries_alike:
                    scores = memory.scores(q_vectors[q.qid], q.question, setting)
                    retrieved.setdefault(q.qid, {})[name] = [
                        memory.pids[i] for i in distinct_top(memory.pids, scores, recorded.k)]
    same = sum(lists["profile"] == run["retrieved"][qid]["epic"]
               for qid, lists in retrieved.items())
    return {"bench": "settings_replay", "profile": run["profile"], "corpus": run["corpus"],
            "judged_set": str(root) if root else None, "k": recorded.k, "tries": names,
            "replay_equals_run": same / max(len(retrieved), 1), "retrieved": retrieved,
            "splits": score(retrieved, names, root)}


def main(argv: list[str] | None = None) -> int:
    p = replay_parser("settings_replay", __doc__)
    p.add_argument("--set", dest="sets", action="append", required=True, metavar="KEY=V1,V2",
                   help=f"a [retrieval] key ({', '.join(KEYS)}) and the values to try "
                        "(repeat for more keys)")
    args = p.parse_args(argv)
    tries = parse(args.sets)
    result = replay(read_run(args.run), tries, args.judged, args.models)
    return report(result, args.json, f"the profile's ranking, replayed, equals the run's lists "
                  f"for {result['replay_equals_run']:.0%} of questions")

if __name__ == "__main__":
    raise SystemExit(main())
