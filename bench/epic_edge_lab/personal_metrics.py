"""Figures of `bench personal`: what a memory kept of a labelled stream, answer recall, buffers."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from epic_edge.retrieval import question_withholds
from epic_edge_lab.judged_metrics import bootstrap_ci
from epic_edge_lab.personal_data import Persona


def keep_figures(persona: Persona, kept: Mapping[str, Iterable[str]]) -> dict[str, Any]:
    """Keep recall and precision, preferences left with no entry and filing accuracy of a
    memory that holds `kept` (item id -> the preference ids its entries are filed under)."""
    kept = {item: frozenset(prefs) for item, prefs in kept.items()}
    relevant = persona.relevant
    hits = relevant & set(kept)
    borne = {p for prefs in persona.bears_on.values() for p in prefs}  # prefs with an item
    filed = set().union(*kept.values()) if kept else set()
    rightly = [item for item in hits if kept[item] & persona.bears_on[item]]
    return {"items": len(persona.items), "relevant": len(relevant), "kept": len(kept),
            "kept_relevant": len(hits),
            "keep_recall": _share(len(hits), len(relevant)),
            "keep_precision": _share(len(hits), len(kept)),
            "preferences_with_items": len(borne),
            "no_entry": sorted(p for p in persona.preferences if p in borne and p not in filed),
            "filing_accuracy": _share(len(rightly), len(hits)),
            "kept_by": _kept_by(persona, set(kept))}


def _kept_by(persona: Persona, kept: set[str]) -> dict[str, dict[str, list[int]]]:
    """[kept, total] of the relevant items per label of how they bear on a preference and
    per kind, and of the near misses (same field, nothing a preference bears on)."""
    out: dict[str, dict[str, list[int]]] = {"how": {}, "kind": {}, "near_miss": {}}
    for item in persona.items:
        cells = ([out["how"].setdefault(b["how"], [0, 0]) for b in item.get("bears_on") or []]
                 + ([out["kind"].setdefault(item["kind"], [0, 0])] if item.get("bears_on")
                    else []))
        if item.get("near_miss_of"):
            cells.append(out["near_miss"].setdefault("all", [0, 0]))
        for cell in cells:
            cell[0] += item["id"] in kept
            cell[1] += 1
    return out


def recall_at_k(ranked: Sequence[str], answers: Iterable[str], k: int = 5) -> float:
    """Share of the answer items among the first k distinct items of a ranked list."""
    answers = set(answers)
    top = list(dict.fromkeys(ranked))[:k]
    return _share(len(answers.intersection(top)), len(answers))


def cosine_top(q: np.ndarray, vectors: np.ndarray, ids: Sequence[Any], k: int) -> list[Any]:
    """The ids of the k rows of `vectors` (one per id) closest to `q` by dot product, ties in
    the ids' order."""
    if not len(ids):
        return []
    return top_ids(np.asarray(vectors, np.float32) @ np.asarray(q, np.float32), ids, k)


def top_ids(scores: np.ndarray, ids: Sequence[Any], k: int) -> list[Any]:
    """The ids of the k highest `scores` (one per id), ties in the ids' order."""
    return [ids[i] for i in np.argsort(-np.asarray(scores), kind="stable")[:k]]


def fit_prefix(order: Sequence[str], sizes: Mapping[str, int], budget: float) -> list[str]:
    """The longest prefix of `order` whose sizes sum to at most `budget` bytes."""
    out, used = [], 0
    for item in order:
        if used + sizes[item] > budget:
            break
        out.append(item)
        used += sizes[item]
    return out


def recency_buffer(ids: Sequence[str], sizes: Mapping[str, int], budget: float) -> list[str]:
    """The most recent items (`ids` in time order) that fit `budget` bytes."""
    return fit_prefix(list(reversed(ids)), sizes, budget)


def random_buffer(ids: Sequence[str], sizes: Mapping[str, int], budget: float,
                  seed: int) -> list[str]:
    """Items in a random order (fixed `seed`) as long as they fit `budget` bytes."""
    order = list(ids)
    random.Random(seed).shuffle(order)
    return fit_prefix(order, sizes, budget)


def question_figures(rows: Sequence[Mapping[str, Any]], systems: Sequence[str]
                     ) -> dict[str, Any]:
    """One persona's top-k recall per system and question kind, and the gate's shares.

    Each row: {"prefs": [...], "answers": [...], "used_memory": bool, "recall": {system: r},
    "held": the share of its answer items the memory holds (EPIC's ceiling)}.
    """
    out: dict[str, Any] = {"recall": {}}
    kinds = {"preference": [r for r in rows if r["prefs"]],
             "no_preference": [r for r in rows if not r["prefs"]]}
    for system in systems:
        out["recall"][system] = {kind: _mean(r["recall"][system] for r in part if r["answers"])
                                 for kind, part in kinds.items()}
        out["recall"][system]["all"] = _mean(r["recall"][system] for r in rows if r["answers"])
    out["no_memory"] = {kind: _mean(float(not r["used_memory"]) for r in part)
                        for kind, part in kinds.items()}
    out["answers_held"] = {kind: _mean(r["held"] for r in part if r["answers"])
                           for kind, part in kinds.items()}
    return out


def memory_given_by(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Of one budget's no-preference questions, how many the question gate withheld memory
    from, and of those given memory, how many passed the gate by their closest preference
    (>= gate) and how many by their best entry alone (>= item cut)."""
    out = {"questions": 0, "by_question_gate": 0, "given": 0, "by_preference": 0,
           "by_entry_only": 0}
    for row in rows:
        for q in row["per_question"]:
            if q["prefs"]:
                continue
            out["questions"] += 1
            evidence = q["evidence"]
            if len(evidence) > 2 and question_withholds(evidence[0], evidence[2],
                                                        row.get("question_cut"),
                                                        row.get("question_below")):
                out["by_question_gate"] += 1
            if q["used_memory"]:
                out["given"] += 1
                by_pref = row["gate"] is None or q["evidence"][0] >= row["gate"]
                out["by_preference" if by_pref else "by_entry_only"] += 1
    return out


def pooled(values: Iterable[float], seed: int = 0) -> dict[str, Any]:
    """Mean over personas (those with a value) and its 95% bootstrap interval."""
    arr = [v for v in values if v is not None and not math.isnan(v)]
    if not arr:
        return {"mean": float("nan"), "ci": [float("nan")] * 2, "n": 0}
    return {"mean": float(np.mean(arr)), "ci": list(bootstrap_ci(arr, seed=seed)), "n": len(arr)}


def paired(a: Sequence[float], b: Sequence[float], seed: int = 0) -> dict[str, Any]:
    """a - b over the personas where both have a value: mean and a paired bootstrap interval."""
    return pooled((x - y for x, y in zip(a, b)
                   if not (math.isnan(x) or math.isnan(y))), seed)


def summarize(rows: Sequence[Mapping[str, Any]], systems: Sequence[str],
              reference: str = "epic") -> dict[str, Any]:
    """Pooled figures of one budget's per-persona rows (keep, recall, gate, bytes)."""
    def over(get: Callable[[Mapping[str, Any]], float]) -> list[float]:
        return [float(get(r)) for r in rows]

    keep = {key: pooled(over(lambda r, key=key: r["keep"][key]))
            for key in ("keep_recall", "keep_precision", "filing_accuracy")}
    for key in ("relevant", "kept", "kept_relevant", "preferences_with_items"):
        keep[key] = sum(r["keep"][key] for r in rows)  # totals over personas
    keep["no_entry"] = sum(len(r["keep"]["no_entry"]) for r in rows)
    keep["keep_recall_over_items"] = _share(keep["kept_relevant"], keep["relevant"])
    keep["keep_precision_over_items"] = _share(keep["kept_relevant"], keep["kept"])
    keep["evicted"] = sum(r.get("evicted", 0) for r in rows)
    keep["kept_by"] = {}
    for r in rows:
        for axis, cells in r["keep"]["kept_by"].items():
            for label, (kept, total) in cells.items():
                cell = keep["kept_by"].setdefault(axis, {}).setdefault(label, [0, 0])
                cell[0] += kept
                cell[1] += total
    recall: dict[str, Any] = {}
    for kind in ("preference", "no_preference", "all"):
        recall[kind] = {}
        base = over(lambda r, kind=kind: r["questions"]["recall"][reference][kind])
        for system in systems:
            mine = over(lambda r, s=system, kind=kind: r["questions"]["recall"][s][kind])
            recall[kind][system] = pooled(mine)
            if system != reference:
                recall[kind][system]["vs_" + reference] = paired(base, mine)
    gate = {kind: pooled(over(lambda r, kind=kind: r["questions"]["no_memory"][kind]))
            for kind in ("preference", "no_preference")}
    held = {kind: pooled(over(lambda r, kind=kind: r["questions"]["answers_held"][kind]))
            for kind in ("preference", "no_preference")}
    sizes = {key: float(np.median(over(lambda r, key=key: r["bytes"][key])))
             for key in rows[0]["bytes"]} if rows else {}
    return {"personas": len(rows), "keep": keep, "recall": recall, "no_memory": gate,
            "memory_given_by": memory_given_by(rows), "answers_held": held,
            "bytes_median": sizes}


def _share(part: int, whole: int) -> float:
    return part / whole if whole else float("nan")


def _mean(values: Iterable[float]) -> float:
    arr = [v for v in values if not math.isnan(v)]
    return float(np.mean(arr)) if arr else float("nan")
