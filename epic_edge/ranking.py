"""How a lookup orders a memory's entries: vector score, plus lexical and confidence evidence."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from epic_edge.entry_index import EntryIndex
    from epic_edge.memory import Memory
    from epic_edge.store import MemoryStore

Evidence = tuple[np.ndarray, np.ndarray]  # (entry ids, sorted; one weighted score per entry)


class ConfidenceEvidence:
    """Each entry's confidence (the verifier's P(Keep) when it was filed) and the preference it
    is filed under, re-read after the entries change (the entry index's version)."""

    def __init__(self) -> None:
        self._version = -1
        self._ids = np.empty(0, np.int64)
        self._preferences = np.empty(0, np.int64)
        self._confidences = np.empty(0, np.float64)

    def scores(self, store: MemoryStore, entries: EntryIndex, preference_ids: np.ndarray,
               leaning: np.ndarray) -> Evidence:
        """(entry ids, sorted; confidence x how much the question leans to the entry's
        preference: `leaning[i]` for `preference_ids[i]`, 0 for a preference not listed)."""
        with entries.lock:
            if entries.version != self._version:
                ids, self._preferences, self._confidences = store.entry_confidences()
                keep = np.isin(ids, entries.ids)  # what the index holds
                self._ids, self._preferences = ids[keep], self._preferences[keep]
                self._confidences, self._version = self._confidences[keep], entries.version
            order = np.argsort(preference_ids)
            known, leaning = np.asarray(preference_ids)[order], np.asarray(leaning)[order]
            at = np.clip(np.searchsorted(known, self._preferences), 0, max(len(known) - 1, 0))
            weight = (np.where(known[at] == self._preferences, leaning[at], 0.0) if len(known)
                      else np.zeros(len(self._ids)))
            return self._ids, weight * self._confidences


def boosts(memory: Memory, question: str, q: np.ndarray, steer: bool) -> list[Evidence]:
    """The weighted evidence the memory's ranking adds to each entry's vector score: lexical x
    the question's BM25 (divided by the best one); confidence x the entry's confidence x the
    steering weight of its preference for `q` (steered lookups only)."""
    found = []
    if memory.lexical:
        ids, bm25 = memory.lexical_evidence.scores(memory.store, memory.entry_index, question)
        found.append((ids, memory.lexical * bm25))
    if steer and memory.confidence and len(memory.steering):
        steering = memory.steering
        ids, lifted = memory.confidence_evidence.scores(
            memory.store, memory.entry_index, np.array([p.id for p in steering.preferences]),
            steering.weights(q))
        found.append((ids, memory.confidence * lifted))
    return found


def fuse(scores: np.ndarray, ids: np.ndarray, boosts: Sequence[Evidence],
         k: int) -> tuple[np.ndarray, np.ndarray]:
    """The top k of score + every boost (an entry a boost does not list gets 0 from it), as
    (vector scores, ids) in that order: a hit keeps its vector score (what floors and gates are
    calibrated on)."""
    valid = ids >= 0
    scores, ids = scores[valid], ids[valid]
    total = scores.astype(np.float64)
    for boost_ids, boost in boosts:
        if len(boost_ids):
            at = np.clip(np.searchsorted(boost_ids, ids), 0, len(boost_ids) - 1)
            total = total + np.where(boost_ids[at] == ids, boost[at], 0.0)
    order = np.argsort(-total, kind="stable")[:k]
    return scores[order], ids[order]
