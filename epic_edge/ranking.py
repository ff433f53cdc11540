"""How a lookup orders a memory's entries: vector score, plus lexical, confidence and brevity
evidence."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from epic_edge.entry_index import EntryIndex
    from epic_edge.store import MemoryStore

Evidence = tuple[np.ndarray, np.ndarray]  # (entry ids, sorted; one weighted score per entry)
# an entry whose item has fewer words than this is short: it loses brevity x (1 - words / this)
BREVITY_WORDS = 30


def shortfall(words: np.ndarray) -> np.ndarray:
    """How far each item falls short of BREVITY_WORDS words: 1 - words / BREVITY_WORDS,
    clipped to [0, 1] (0 from BREVITY_WORDS words on)."""
    return np.clip(1.0 - np.asarray(words, np.float64) / BREVITY_WORDS, 0.0, 1.0)


def weighted(setting: Mapping[str, float | None], bm25: np.ndarray | float = 0.0,
             lifted: np.ndarray | float = 0.0, short: np.ndarray | float = 0.0
             ) -> np.ndarray | float:
    """What the evidence adds to a vector score under a [retrieval] setting: lexical x bm25
    (divided by the best) + confidence x lifted (confidence x leaning) - brevity x short
    (shortfall); an unset weight adds nothing. The one formula the lookup and every offline
    replay of it (epic_edge_lab) share."""
    return (float(setting.get("lexical") or 0.0) * bm25
            + float(setting.get("confidence") or 0.0) * lifted
            - float(setting.get("brevity") or 0.0) * short)


class CachedEvidence:
    """Per-entry arrays read from the store once per change of the entries (the entry index's
    version), so a query pays only for its own part."""

    def __init__(self) -> None:
        self._version = -1
        self._ids = np.empty(0, np.int64)

    def _refresh(self, store: MemoryStore, entries: EntryIndex) -> None:
        """Call under entries.lock: re-read when the entries changed since the last read."""
        if entries.version != self._version:
            self._load(store, entries)
            self._version = entries.version

    def _load(self, store: MemoryStore, entries: EntryIndex) -> None:
        raise NotImplementedError


class ConfidenceEvidence(CachedEvidence):
    """Each entry's confidence (the verifier's P(Keep) when it was filed) and the preference it
    is filed under."""

    def _load(self, store: MemoryStore, entries: EntryIndex) -> None:
        ids, self._preferences, self._confidences = store.entry_confidences()
        keep = np.isin(ids, entries.ids)  # what the index holds
        self._ids, self._preferences = ids[keep], self._preferences[keep]
        self._confidences = self._confidences[keep]

    def scores(self, store: MemoryStore, entries: EntryIndex, preference_ids: np.ndarray,
               leaning: np.ndarray) -> Evidence:
        """(entry ids, sorted; confidence x how much the question leans to the entry's
        preference: `leaning[i]` for `preference_ids[i]`, 0 for a preference not listed)."""
        with entries.lock:
            self._refresh(store, entries)
            order = np.argsort(preference_ids)
            known, leaning = np.asarray(preference_ids)[order], np.asarray(leaning)[order]
            at = np.clip(np.searchsorted(known, self._preferences), 0, max(len(known) - 1, 0))
            weight = (np.where(known[at] == self._preferences, leaning[at], 0.0) if len(known)
                      else np.zeros(len(self._ids)))
            return self._ids, weight * self._confidences


class BrevityEvidence(CachedEvidence):
    """Each entry's shortfall: items of a few words rarely answer or bear on a question, yet
    their vectors can sit close to many (docs/guide.md: Brevity evidence)."""

    def _load(self, store: MemoryStore, entries: EntryIndex) -> None:
        texts = store.entry_texts()
        self._ids = entries.ids
        self._short = shortfall(np.array([len(texts.get(int(i), "").split())
                                          for i in self._ids]))

    def scores(self, store: MemoryStore, entries: EntryIndex) -> Evidence:
        """(entry ids, sorted; each one's shortfall)."""
        with entries.lock:
            self._refresh(store, entries)
            return self._ids, self._short


def fuse(scores: np.ndarray, ids: np.ndarray, boosts: Sequence[Evidence],
         k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The top k of score + every boost (an entry a boost does not list gets 0 from it), as
    (fused scores, vector scores, ids) in that order: a hit shows the score it was ranked by
    and keeps its vector score (what floors and gates are calibrated on)."""
    valid = ids >= 0
    scores, ids = scores[valid], ids[valid]
    total = scores.astype(np.float64)
    for boost_ids, boost in boosts:
        if len(boost_ids):
            at = np.clip(np.searchsorted(boost_ids, ids), 0, len(boost_ids) - 1)
            total = total + np.where(boost_ids[at] == ids, boost[at], 0.0)
    order = np.argsort(-total, kind="stable")[:k]
    return total[order], scores[order], ids[order]
