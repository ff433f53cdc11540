"""Judged retrieval metrics (P@k per axis, nDCG@k, unjudged share) and reader agreement."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence

import numpy as np

from epic_edge_lab.relevance import Judgment, Question

Labels = Mapping[tuple[str, str], tuple[int, int]]  # (qid, pid) -> (answers, aligned)


def gain(answers: int, aligned: int) -> int:
    """nDCG gain: 3 when a passage answers and is aligned, 1 for one axis, 0 for none."""
    return 3 if answers and aligned else int(bool(answers or aligned))


def _dcg(gains: Sequence[int]) -> float:
    return sum(g / math.log2(rank + 2) for rank, g in enumerate(gains))


def score_list(qid: str, pids: Sequence[str], labels: Labels, k: int = 5) -> dict[str, float]:
    """Judged scores of one ranked list. An unjudged passage scores 0 on every axis and is
    counted in `unjudged`; a list shorter than k (memory withheld) scores its empty ranks 0.

    nDCG's ideal ranking is the best k of every judged passage for the question.
    """
    top = list(pids)[:k]
    found = [labels.get((qid, pid)) for pid in top]
    judged = [f for f in found if f is not None]
    answers = sum(a for a, _ in judged)
    aligned = sum(b for _, b in judged)
    both = sum(1 for a, b in judged if a and b)
    gains = [gain(*f) if f is not None else 0 for f in found]
    ideal = sorted((gain(*v) for (q, _), v in labels.items() if q == qid), reverse=True)[:k]
    best = _dcg(ideal)
    return {"aligned": aligned / k, "answers": answers / k, "both": both / k,
            "ndcg": _dcg(gains) / best if best > 0 else 0.0,
            "unjudged": (len(found) - len(judged)) / max(len(found), 1),
            "returned": len(top) / k}


def best_possible(qid: str, pids: Collection[str], labels: Labels,
                  k: int = 5) -> dict[str, float]:
    """The best P@k per axis that any ranking of `pids` could reach for `qid`, each axis on
    its own: the judged positives among them, up to k (unjudged passages count as misses)."""
    found = [labels[(qid, pid)] for pid in set(pids) if (qid, pid) in labels]
    counts = {"answers": sum(a for a, _ in found), "aligned": sum(b for _, b in found),
              "both": sum(1 for a, b in found if a and b)}
    return {axis: min(k, n) / k for axis, n in counts.items()}


def ceilings(questions: Sequence[Question], per_persona: Sequence[Mapping], labels: Labels,
             k: int = 5) -> dict[str, dict[str, dict[str, float]]]:
    """The best judged P@k per axis and split that any ranking could reach: of the passages in
    EPIC's memory (per persona; runs that did not record them are skipped), and of every judged
    passage for the question (the pool)."""
    memory = {p["persona"]: p["memory_pids"] for p in per_persona if "memory_pids" in p}
    pool: dict[str, set[str]] = defaultdict(set)
    for qid, pid in labels:
        pool[qid].add(pid)
    sources = {"judged pool": lambda q: pool[q.qid]}
    if memory and all(q.persona in memory for q in questions):
        sources = {"EPIC's memory": lambda q: memory[q.persona], **sources}
    out = {}
    for name, pids_of in sources.items():
        rows = {q.qid: best_possible(q.qid, pids_of(q), labels, k) for q in questions}
        out[name] = {split: {axis: float(np.mean([rows[q.qid][axis] for q in part]))
                             for axis in ("aligned", "answers", "both")}
                     for split in ("dev", "test")
                     if (part := [q for q in questions if q.split == split])}
    return out


def aggregate(per_question: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Means over questions (unjudged: share of all returned passages)."""
    if not per_question:
        return {}
    keys = ("aligned", "answers", "both", "ndcg", "returned")
    out = {key: float(np.mean([row[key] for row in per_question])) for key in keys}
    returned = sum(row["returned"] for row in per_question)
    out["unjudged"] = (sum(row["unjudged"] * row["returned"] for row in per_question)
                       / returned if returned else 0.0)
    return out


def bootstrap_ci(values: Sequence[float], reps: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% percentile bootstrap interval of a mean over questions."""
    arr = np.asarray(values, dtype=np.float64)
    if len(arr) == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    means = arr[rng.integers(0, len(arr), size=(reps, len(arr)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def cohen_kappa(a: Sequence[int], b: Sequence[int]) -> float:
    """Cohen's kappa of two readers' 0/1 labels on the same passages."""
    if len(a) != len(b) or not a:
        raise ValueError("kappa needs two equally long, non-empty label lists")
    x, y = np.asarray(a, bool), np.asarray(b, bool)
    observed = float(np.mean(x == y))
    chance = float(x.mean() * y.mean() + (1 - x.mean()) * (1 - y.mean()))
    return 1.0 if chance == 1.0 else (observed - chance) / (1.0 - chance)


def agreement(judgments: Sequence[Judgment]) -> dict[str, object]:
    """Per axis: passages judged by two different readers, raw agreement and Cohen's kappa
    (the first two readers of each doubly judged pair)."""
    by_pair: dict[tuple[str, str], list[Judgment]] = {}
    for j in judgments:
        readers = by_pair.setdefault((j.qid, j.pid), [])
        if all(r.judge != j.judge for r in readers):
            readers.append(j)
    twice = [r[:2] for r in by_pair.values() if len(r) >= 2]
    out: dict[str, object] = {"double_judged": len(twice)}
    for axis in ("answers", "aligned"):
        first = [getattr(r[0], axis) for r in twice]
        second = [getattr(r[1], axis) for r in twice]
        out[axis] = ({"kappa": cohen_kappa(first, second),
                      "agreement": float(np.mean(np.equal(first, second)))} if twice else None)
    return out
