"""Where two personal-stream targets meet their walls, measured (docs/personal-stream.md).

`top5`: from a saved `bench personal` run (what each memory kept, and under which preferences
it filed it), the top-5 recall of the preference questions' answer items for rankings that know
which preferences a question touches, which no lookup knows: the entries filed under them first,
by cosine (the memory's filing; the set's labels as the filing of the memory's items; the
labels over every item of the stream). Beside them: store-everything, cosine over the memory,
cosine over the items that bear on some preference (a perfect keep decision, no routing),
how often the preference whose entries best match the question is one it touches (the
best guess a lookup could make from its own memory) and how often the closest preference by
text is, and the share of answer items that bear
on a preference their question touches.
`keep-writers`: the keep score's recipe fitted without one writer's dev personas at a time and
scored on them (precision at keep recall 0.85, pooled and per writer), beside the shipped
folds, which keep a writer's other personas in training, and a learning curve over the writers
the embedder was not tuned on (each scored by fits on k of the others).
`gate-writers`: the question gate refit without one writer's dev questions at a time and
applied to them, at each closest-preference bound (`question_gate_below`): the shares of
no-preference and preference questions given no memory, pooled and per writer.
Each writer wrote the personas of one decade (bench/personal/PROVENANCE.md): p01-p10, p11-p20,
.., p51-p59, ..

    python -m epic_edge_lab.personal_walls top5 bench/results/personal.json --split dev
    python -m epic_edge_lab.personal_walls keep-writers
    python -m epic_edge_lab.personal_walls gate-writers --bounds 0.38,0.45,0.5 [--served 0.98]
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.errors import InvalidInputError
from epic_edge_lab import keep_training
from epic_edge_lab.personal_data import Persona
from epic_edge_lab.personal_metrics import recall_at_k, top_ids

FIRST = 2.0  # added to a cosine (at most 1) to rank an entry before every other
SYSTEMS = ("store-everything", "memory, cosine", "perfect keep, cosine", "oracle, memory's filing",
           "oracle, labels' filing of the memory's items", "oracle, labels' filing, every item")


def oracle_top5(personas: Sequence[Persona], kept: Mapping[int, Mapping[str, Sequence[str]]],
                embed: Callable[[list[str]], np.ndarray], k: int = 5) -> dict[str, Any]:
    """Mean top-k recall of the answer items per system over every preference question with
    answers; `kept` maps a persona's number to its memory (item id -> preferences filed
    under), as a `bench personal` run saves it."""
    recall: dict[str, list[float]] = {name: [] for name in SYSTEMS}
    guessed, closest, bearing = [], [], []
    for persona in personas:
        memory = kept[persona.number]
        ids = [str(item["id"]) for item in persona.items]
        vectors = embed([" ".join(str(item["text"]).split()) for item in persona.items])
        held = np.array([i in memory for i in ids])
        prefs = list(persona.preferences)
        filed = np.array([[p in memory.get(i, ()) for p in prefs] for i in ids])
        labels = np.array([[p in persona.bears_on.get(i, ()) for p in prefs] for i in ids])
        mem_ids = [i for i, h in zip(ids, held) if h]
        bears = np.array([bool(persona.bears_on.get(i)) for i in ids])
        bearing_ids = [i for i, b in zip(ids, bears) if b]
        pref_vectors = embed([persona.preferences[p] for p in prefs])
        for question in persona.questions:
            if not question.prefs or not question.answers:
                continue
            q = embed([question.text])[0]
            s = vectors @ q
            touched = np.array([p in question.prefs for p in prefs])
            closest.append(bool(touched[int(np.argmax(pref_vectors @ q))]))
            bearing += [bool(persona.bears_on.get(a, frozenset()) & set(question.prefs))
                        for a in question.answers]
            lists = {"store-everything": top_ids(s, ids, k),
                     "memory, cosine": top_ids(s[held], mem_ids, k),
                     "perfect keep, cosine": top_ids(s[bears], bearing_ids, k),
                     "oracle, memory's filing":
                         top_ids((s + FIRST * (filed @ touched > 0))[held], mem_ids, k),
                     "oracle, labels' filing of the memory's items":
                         top_ids((s + FIRST * (labels @ touched > 0))[held], mem_ids, k),
                     "oracle, labels' filing, every item":
                         top_ids(s + FIRST * (labels @ touched > 0), ids, k)}
            for name, ranked in lists.items():
                recall[name].append(recall_at_k(ranked, question.answers, k))
            best = [s[held & filed[:, j]].max() if (held & filed[:, j]).any() else -np.inf
                    for j in range(len(prefs))]
            if np.isfinite(max(best)):
                guessed.append(bool(touched[int(np.argmax(best))]))
    if not guessed:
        raise InvalidInputError("no preference question with answers and a non-empty memory")
    return {"questions": len(recall["store-everything"]), "k": k,
            "recall": {name: float(np.mean(r)) for name, r in recall.items()},
            "best_matching_preference_touched": float(np.mean(guessed)),
            "closest_preference_touched": float(np.mean(closest)),
            "answers_bearing_on_a_touched_preference": float(np.mean(bearing))}


def saved_memories(path: Path, budget: str = "profile") -> dict[int, dict[str, list[str]]]:
    """Each persona's memory in a saved `bench personal` run at `budget`: its number -> item
    id -> the preferences the item is filed under."""
    try:
        run = json.loads(path.read_text(encoding="utf-8"))
        return {int(row["persona"]): row["kept"]
                for row in run["per_budget"][budget]["per_persona"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InvalidInputError(f"{path}: not a saved `bench personal` run with budget "
                                f"{budget!r} ({exc})") from exc


def writer_of(number: int) -> int:
    """The writer of persona pNN: ten personas each, p01-p10 the first."""
    return (number - 1) // 10


def writer_label(writer: int) -> str:
    """The decade of persona numbers one writer wrote: "p01-p10" for writer 0."""
    return f"p{10 * writer + 1:02d}-p{10 * writer + 10:02d}"


def keep_by_writer(data: keep_training.Pairs, numbers: Sequence[int], tau: float,
                   recall: float = 0.85) -> dict[str, Any]:
    """Precision at `recall` of the keep recipe's scores cross-fitted by writer (pooled and
    per writer) and by the shipped persona folds; `numbers[i]` is the persona number of
    position i in `data.persona`."""
    writer = np.array([writer_of(numbers[n]) for n in data.persona])
    by_writer = np.zeros(len(data.y))
    for w in np.unique(writer):
        weights, bias = keep_training.linear_score(data.x[writer != w], data.y[writer != w])
        by_writer[writer == w] = data.x[writer == w] @ weights + bias
    item_writer = np.zeros(len(data.item_label), int)
    item_writer[data.item] = writer

    def precision(scores: np.ndarray, part: np.ndarray | None = None) -> float:
        items = keep_training.item_scores(data, scores, tau)
        labels = data.item_label
        if part is not None:
            items, labels = items[part], labels[part]
        cut = keep_training.threshold_at_recall(labels, items, recall)
        return float(labels[items >= cut].mean())

    by_persona = keep_training.cross_fitted(data)
    return {"recall": recall, "tau": tau,
            "by_training_writers": _writer_curve(data, writer, item_writer, precision),
            "persona_folds": {"precision": precision(by_persona),
                              "pair_auc": keep_training.auc(data.y, by_persona)},
            "by_writer": {"precision": precision(by_writer),
                          "pair_auc": keep_training.auc(data.y, by_writer)},
            "per_writer": {writer_label(w):
                           precision(by_writer, item_writer == w) for w in np.unique(writer)},
            "pair_auc_cosine": keep_training.auc(data.y, data.cosine)}


def _writer_curve(data: keep_training.Pairs, writer: np.ndarray, item_writer: np.ndarray,
                  precision: Callable[[np.ndarray, np.ndarray], float]) -> dict[str, Any]:
    """Does the recipe gain from more writers? Each writer the embedder was not tuned on is
    scored by fits on every choice of k of the others (k = 1, 2, ...): mean precision over the
    choices, then over the scored writers. `writer` is each pair's, `item_writer` each
    item's."""
    from epic_edge_lab.embedder_training import FIT_ON
    from epic_edge_lab.personal_data import number_range

    untuned = sorted({writer_of(n) for n in number_range(FIT_ON)} & set(writer.tolist()))
    fits: dict[tuple[int, ...], np.ndarray] = {}  # each choice of writers fitted once

    def scores(chosen: tuple[int, ...]) -> np.ndarray:
        if chosen not in fits:
            rows = np.isin(writer, chosen)
            weights, bias = keep_training.linear_score(data.x[rows], data.y[rows])
            fits[chosen] = data.x @ weights + bias
        return fits[chosen]

    curve: dict[str, Any] = {}
    for k in range(1, len(untuned)):
        means = []
        for scored in untuned:
            others = [w for w in untuned if w != scored]
            means.append(float(np.mean([precision(scores(c), item_writer == scored)
                                        for c in itertools.combinations(others, k)])))
        curve[str(k)] = {"precision": float(np.mean(means)),
                         "per_writer": dict(zip(map(writer_label, untuned), means))}
    return {"writers": [writer_label(w) for w in untuned], "curve": curve}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m epic_edge_lab.personal_walls",
                                 description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="step", required=True)
    top5 = sub.add_parser("top5", help="oracle rankings over a saved `bench personal` run")
    top5.add_argument("run", type=Path)
    top5.add_argument("--split", default="dev", choices=("dev", "test", "all"))
    top5.add_argument("--budget", default="profile", help="which budget of the run")
    sub.add_parser("keep-writers", help="the keep recipe cross-fitted by writer (dev)")
    gate = sub.add_parser("gate-writers", help="the question gate cross-fitted by writer (dev)")
    gate.add_argument("--bounds", default="0.38,0.40,0.45,0.50,0.55,0.60",
                      help="closest-preference bounds to report, comma-separated")
    gate.add_argument("--gate-set", type=Path, default=None,
                      help="written gate set (default bench/personal/gate/questions.jsonl)")
    gate.add_argument("--served", type=float, default=0.97,
                      help="share of preference questions each refit's threshold gives memory, "
                           "cross-fitted (default 0.97, as train-question-gate)")
    for step in (top5, sub.choices["keep-writers"], gate):
        step.add_argument("--data", type=Path, default=None, help="personal-stream set folder")
        step.add_argument("--profile", default="linux-cpu")
    args = ap.parse_args(argv)
    try:
        print(json.dumps(_run_step(args), indent=2))
    except InvalidInputError as exc:
        ap.error(str(exc))


def _run_step(args: argparse.Namespace) -> dict[str, Any]:
    from epic_edge import registry
    from epic_edge.models import model_dir
    from epic_edge.profiles import load_profile
    from epic_edge_lab import personal_data

    profile = load_profile(args.profile)
    if args.step == "gate-writers":
        return _gate_writers(args, profile)
    if args.step == "keep-writers":
        personas = personal_data.load(args.data, "dev")
        embedder = registry.create("embedder", profile.embedder, model_dir())
        verifier = registry.create("verifier", {**profile.verifier, "keep_score": None},
                                   model_dir())
        data = keep_training.pairs(personas, embedder, verifier)
        return keep_by_writer(data, [p.number for p in personas], float(profile.embedder["tau"]))
    kept = saved_memories(args.run, args.budget)
    personas = personal_data.load(args.data, args.split)
    missing = [p.number for p in personas if p.number not in kept]
    if missing:
        raise InvalidInputError(f"{args.run} has no memory of personas {missing} "
                                f"(run with --split {args.split})")
    embedder = registry.create("embedder", profile.embedder, model_dir())
    return oracle_top5(personas, kept, embedder.embed)


def _gate_writers(args: argparse.Namespace, profile: Any) -> dict[str, Any]:
    from epic_edge import registry
    from epic_edge.models import model_dir
    from epic_edge_lab import gate_training, personal_data

    try:
        bounds = [float(b) for b in args.bounds.split(",")]
    except ValueError:
        raise InvalidInputError(f"--bounds wants numbers like 0.38,0.45, got {args.bounds!r}"
                                ) from None
    gate_training.check_served(args.served)
    personas = personal_data.load(args.data, "dev")
    embed = registry.create("embedder", profile.embedder, model_dir()).embed
    written = gate_training.gate_set(args.gate_set or gate_training.GATE_SET)
    data = gate_training.questions(personas, written, gate_training.judged_dev())
    writer = np.array([writer_of(p.number) for p in personas for _ in p.questions])
    report = gate_training.by_writer(data, embed(data.text),
                                     gate_training.personal_closest(personas, embed),
                                     writer, bounds, args.served)
    for row in report.values():
        row["per_writer"] = {writer_label(w): rates for w, rates in row["per_writer"].items()}
    return report


if __name__ == "__main__":
    main()
