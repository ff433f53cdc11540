"""Judge-free quality metrics: PAP@k, Hit@k, routing accuracy, coverage; timing summaries."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

import numpy as np

from epic_edge.measuring import summarize  # noqa: F401  (re-exported)

# A retrieved hit as the metrics see it: (preference its entry is filed under or None for a
# raw item, every preference the hit's item links to).
Ranked = Sequence[tuple[object, Collection[object]]]


def pap_at_k(hits: Ranked, gold: object, k: int = 5) -> float:
    """Preference-aligned precision of one ranked list.

    (1/k) * sum over the top-k hits of [the hit's entry links to `gold`] / |links of its item|.
    For an instruction entry the entry's own preference decides the indicator; for a raw item
    (entry preference None) the indicator is `gold` in its links. An item with no link scores
    0, and tagging an item with every preference earns 1/|P| per hit, not 1.
    """
    if k < 1:
        raise ValueError("k must be at least 1")
    total = 0.0
    for entry_pref, links in list(hits)[:k]:
        linked = entry_pref == gold if entry_pref is not None else gold in links
        if linked and links:
            total += 1.0 / len(links)
    return total / k


def hit_at_k(hits: Ranked, gold: object, k: int = 5) -> float:
    """1.0 when some top-k hit links to `gold`, else 0.0 (unweighted)."""
    for entry_pref, links in list(hits)[:k]:
        if (entry_pref == gold) if entry_pref is not None else (gold in links):
            return 1.0
    return 0.0


def routing_accuracy(routed: Sequence[object], gold: Sequence[object]) -> float:
    """Share of questions whose p* = argmax_p E(q)·E(p) is the gold preference."""
    if len(routed) != len(gold):
        raise ValueError("one routed preference per gold preference is required")
    return float(np.mean([r == g for r, g in zip(routed, gold)])) if gold else float("nan")


def coverage(preferences: Collection[object], linked: Iterable[object]) -> float:
    """Share of `preferences` with at least one entry (linked item) in the memory."""
    if not preferences:
        return float("nan")
    present = set(linked)
    return sum(1 for p in preferences if p in present) / len(preferences)


def assign_links(item_vectors: np.ndarray, pref_vectors: np.ndarray,
                 tau: float) -> list[frozenset[int]]:
    """The fixed assigner for raw-item systems: P_rel(x) = {j : E(x)·E(p_j) >= tau}."""
    if len(item_vectors) == 0:
        return []
    scores = np.asarray(item_vectors, np.float32) @ np.asarray(pref_vectors, np.float32).T
    return [frozenset(np.flatnonzero(row >= tau).tolist()) for row in scores]
