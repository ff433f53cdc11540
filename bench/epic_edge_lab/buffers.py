"""Equal-size buffers beside a saved `bench quality` run, and what judging a sample of their hits
says of them (BENCHMARKS.md, *Quality against budget*).

Per persona, the recency buffer is the most recent chunks of the corpus stream (the order EPIC
ingested it) and the random buffer a random sample of it (seeded by persona), each as many as
fit the bytes EPIC's memory file took; each ranks a question's top k by cosine. Their lists join
the run's `retrieved`, so `bench pool` and the judged scoring treat them as any system. A 1 MB
buffer holds about 1% of the firehose, so nearly all its hits are new to the judged set: rather
than judge every one, `sample` draws a uniform sample of the unjudged (question, passage) pairs
per buffer for blind readers, and `estimate` adds the sampled rate of each axis for the pairs
left unjudged, with a Wilson interval.

    python -m epic_edge_lab.buffers add RUN.json --json RUN-buffers.json
    python -m epic_edge_lab.buffers sample RUN-buffers.json --split test --pairs 100 --out DIR
    python -m epic_edge_lab.buffers estimate RUN-buffers.json --split test --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.errors import InvalidInputError
from epic_edge_lab import common, corpora, pooling, relevance
from epic_edge_lab.judged_metrics import score_list
from epic_edge_lab.personal import item_bytes
from epic_edge_lab.personal_metrics import cosine_top, random_buffer, recency_buffer
from epic_edge_lab.quality import rescore
from epic_edge_lab.vectors import corpus_vectors

BUFFERS = ("recency", "random")
AXES = ("aligned", "answers", "both")


def add(run: dict[str, Any], seed: int = 0) -> dict[str, Any]:
    """The run with each persona's recency and random buffer ranked for its questions."""
    prof, model_dir = common.profile_and_models(run["profile"], None)
    embedder = common.make_embedder(prof, model_dir)
    items = corpora.load(run["corpus"])
    vectors, _ = corpus_vectors(run["corpus"], items, embedder, corpora.data_dir() / "vectors")
    fmt = str((prof.index or {}).get("vectors", "float32"))
    sizes = [item_bytes({"text": it.text, "kind": it.source, "id": it.id}, fmt, embedder.dim)
             for it in items]
    asked = [q for q in relevance.load_questions("all") if q.qid in run["retrieved"]]
    qvec = dict(zip((q.qid for q in asked), embedder.embed([q.question for q in asked])))
    for row in run["per_persona"]:
        asks = [q for q in asked if q.persona == row["persona"]]
        found = ranked(vectors, sizes, row["systems"]["epic"]["bytes"],
                       np.array([qvec[q.qid] for q in asks]), run["k"], seed + row["persona"])
        for name, (chosen, lists, ms) in found.items():
            for q, top in zip(asks, lists):
                run["retrieved"][q.qid][name] = [relevance.passage_id(items[i].text)
                                                 for i in top]
            row["systems"][name] = {"ms": ms, "bytes": int(sum(sizes[i] for i in chosen)),
                                    "chunks": len(chosen)}
    run["buffers"] = {"seed": seed, "budget": "each persona's EPIC memory file bytes",
                      "order": "corpus order, as EPIC ingested it"}
    labels = relevance.primary_labels(relevance.load_judgments())
    return rescore(run, labels)


def ranked(vectors: np.ndarray, sizes: list[int], budget: float, questions: np.ndarray,
           k: int, seed: int) -> dict[str, tuple[list[int], list[list[int]], list[float]]]:
    """Per buffer: the chunks (rows of `vectors`, in stream order) it holds within `budget`
    bytes, each question's top k of them by cosine, and the milliseconds each ranking took."""
    ids, by_id = list(range(len(sizes))), dict(enumerate(sizes))
    out = {}
    for name, chosen in (("recency", recency_buffer(ids, by_id, budget)),
                         ("random", random_buffer(ids, by_id, budget, seed))):
        held = vectors[chosen]  # the buffer's own vectors, gathered once
        lists, ms = [], []
        for q in questions:
            start = time.perf_counter()
            lists.append(cosine_top(q, held, chosen, k))
            ms.append((time.perf_counter() - start) * 1000)
        out[name] = (chosen, lists, ms)
    return out


def asked(run: dict[str, Any], split: str) -> list[str]:
    """The ids of the run's questions of `split`."""
    return [q.qid for q in relevance.load_questions(split) if q.qid in run["retrieved"]]


def unjudged(run: dict[str, Any], split: str, labels: dict) -> dict[str, list[tuple[str, str]]]:
    """Per buffer, its (question, passage) hits of `split` nobody has judged, in order."""
    qids = asked(run, split)
    return {name: list(dict.fromkeys((qid, pid) for qid in qids
                                     for pid in run["retrieved"][qid][name][:run["k"]]
                                     if (qid, pid) not in labels)) for name in BUFFERS}


def sample(run: dict[str, Any], split: str, pairs: int, out: Path, seed: int = 0
           ) -> dict[str, Any]:
    """Reader batches of a uniform sample of `pairs` unjudged hits per buffer (blind: the
    batches name no system), and `out`/sample.json recording the draw."""
    labels = relevance.primary_labels(relevance.load_judgments())
    drawn = {name: random.Random(f"{seed}-{name}").sample(found, min(pairs, len(found)))
             for name, found in unjudged(run, split, labels).items()}
    lists: dict[str, dict[str, list[str]]] = {}
    for name, chosen in drawn.items():
        for qid, pid in chosen:
            lists.setdefault(qid, {}).setdefault(name, []).append(pid)
    wanted = {pid for found in lists.values() for pids in found.values() for pid in pids}
    written = pooling.pool({"retrieved": lists, "passages": {
        pid: p for pid, p in run["passages"].items() if pid in wanted}}, out)
    (out / "sample.json").write_text(json.dumps(
        {"split": split, "seed": seed, "pairs": {n: [list(p) for p in c]
                                                 for n, c in drawn.items()}}, indent=1))
    return written


def wilson(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson interval of a rate from `hits` of `n`."""
    if n == 0:
        return 0.0, 1.0
    p, denominator = hits / n, 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return float(max(centre - half, 0.0)), float(min(centre + half, 1.0))


def estimate(run: dict[str, Any], split: str, sampled: dict[str, Any]) -> dict[str, Any]:
    """Each buffer's P@k per axis: its judged hits, plus the sampled rate for those unjudged."""
    labels = relevance.primary_labels(relevance.load_judgments())
    qids = asked(run, split)
    left = unjudged(run, split, labels)
    k, out = run["k"], {}
    for name in BUFFERS:
        judged = [labels[tuple(p)] for p in sampled["pairs"][name] if tuple(p) in labels]
        found = [score_list(qid, run["retrieved"][qid][name], labels, k) for qid in qids]
        share = len(left[name]) / (k * len(qids))  # of all the buffer's hits, still unjudged
        cell: dict[str, Any] = {"sample_judged": len(judged), "unjudged_share": share}
        for axis in AXES:
            positive = sum(_axis(axis, a, b) for a, b in judged)
            low, high = wilson(positive, len(judged))
            base = float(np.mean([f[axis] for f in found]))
            rate = positive / len(judged) if judged else float("nan")
            cell[axis] = {"judged_only": base, "estimate": base + share * rate,
                          "interval": [base + share * low, base + share * high],
                          "sampled_positive": positive}
        out[name] = cell
    return out


def _axis(axis: str, answers: int, aligned: int) -> int:
    return {"aligned": aligned, "answers": answers, "both": int(answers and aligned)}[axis]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m epic_edge_lab.buffers", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="step", required=True)
    a = sub.add_parser("add", help="rank each persona's equal-size buffers into a saved run")
    a.add_argument("run", type=Path)
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--json", type=Path, required=True)
    s = sub.add_parser("sample", help="reader batches of a sample of the buffers' unjudged hits")
    s.add_argument("run", type=Path)
    s.add_argument("--split", choices=("dev", "test", "all"), default="test")
    s.add_argument("--pairs", type=int, default=100, help="sampled pairs per buffer")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", type=Path, required=True)
    e = sub.add_parser("estimate", help="the buffers' figures once the sample is judged")
    e.add_argument("run", type=Path)
    e.add_argument("--split", choices=("dev", "test", "all"), default="test")
    e.add_argument("--sampled", type=Path, required=True, help="the sample's sample.json")
    e.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.step == "sample" and args.pairs < 1:
        ap.error("--pairs must be at least 1")
    try:
        _run_step(args)
    except InvalidInputError as exc:
        ap.error(str(exc))


def _run_step(args: argparse.Namespace) -> None:
    if args.step == "add":
        result = add(pooling.saved_run(args.run), args.seed)
        result.pop("passages", None)  # results never hold corpus text
        common.write_json(result, args.json)
        for split in ("dev", "test"):
            for name in ("store-everything", "epic", *BUFFERS):
                cell = result["systems"][name][split]
                print(f"{split:4s} {name:16s} " + ", ".join(
                    f"{axis} {cell[axis]:.3f}" for axis in (*AXES, "unjudged")))
    elif args.step == "sample":
        print(json.dumps(sample(pooling.saved_run(args.run), args.split, args.pairs, args.out,
                                args.seed), indent=1))
    else:
        run, sampled = _read(args.run, "run"), _read(args.sampled, "sample")
        if any(set(BUFFERS) - set(lists) for lists in run.get("retrieved", {}).values()):
            raise InvalidInputError(f"{args.run} holds no buffers: run `add` on it first")
        if set(BUFFERS) - set(sampled.get("pairs", {})):
            raise InvalidInputError(f"{args.sampled} is not a sample.json that `sample` wrote")
        found = estimate(run, args.split, sampled)
        print(json.dumps(found, indent=1))
        if args.json:
            common.write_json(found, args.json)



def _read(path: Path, what: str) -> dict[str, Any]:
    """A JSON object from `path`; a one-line error when it is missing or not JSON."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"cannot read the {what} {path}: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidInputError(f"the {what} {path} is not a JSON object")
    return data


if __name__ == "__main__":
    main()
