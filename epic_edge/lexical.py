"""Lexical evidence: BM25 of a question over a memory's entries (epic_edge.ranking fuses it)."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from epic_edge.ranking import CachedEvidence

if TYPE_CHECKING:
    from epic_edge.entry_index import EntryIndex
    from epic_edge.store import MemoryStore

STOPWORDS = frozenset(
    "a an the of to in on for and or is are was were be been it this that with as at by from "
    "what which who whom how why when where do does did i me my we you your should can could "
    "would will about any some there their they them he she his her its into than then so if "
    "not no but have has had".split())


def terms(text: str) -> list[str]:
    """Lower-case words of two or more characters, stopwords left out."""
    return [t for t in re.findall(r"[a-z0-9]+", text.lower()) if len(t) > 1 and t not in STOPWORDS]


class BM25:
    """Okapi BM25 (k1, b) with an inverted index: a query touches only passages sharing a term."""

    def __init__(self, texts: Sequence[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.size = len(texts)
        counts = [Counter(terms(t)) for t in texts]
        lengths = np.array([sum(c.values()) for c in counts], np.float64)
        average = float(lengths.mean()) if self.size else 1.0
        norm = k1 * (1.0 - b + b * lengths / max(average, 1e-9))
        self.postings: dict[str, list[tuple[int, float]]] = {}
        for i, c in enumerate(counts):
            for term, f in c.items():
                self.postings.setdefault(term, []).append((i, f * (k1 + 1.0) / (f + norm[i])))
        self.idf = {t: math.log(1.0 + (self.size - len(p) + 0.5) / (len(p) + 0.5))
                    for t, p in self.postings.items()}

    def scores(self, query: str) -> np.ndarray:
        """One BM25 score per passage (0 where no query term occurs)."""
        out = np.zeros(self.size, np.float64)
        for term in set(terms(query)):
            for i, weight in self.postings.get(term, ()):
                out[i] += self.idf[term] * weight
        return out

    def normalised(self, query: str) -> np.ndarray:
        """Scores divided by the best one, in [0, 1] (all 0 when nothing matches)."""
        s = self.scores(query)
        top = float(s.max()) if self.size else 0.0
        return s / top if top > 0 else s


class LexicalEvidence(CachedEvidence):
    """BM25 over the item texts of a memory's entries, rebuilt after the entries change, so a
    query pays only the lookup of its own terms."""

    def __init__(self) -> None:
        super().__init__()
        self._bm25 = BM25([])

    def _load(self, store: MemoryStore, entries: EntryIndex) -> None:
        self._ids = entries.ids
        texts = store.entry_texts()
        self._bm25 = BM25([texts.get(int(i), "") for i in self._ids])

    def scores(self, store: MemoryStore, entries: EntryIndex,
               question: str) -> tuple[np.ndarray, np.ndarray]:
        """(entry ids, sorted; their BM25 scores for `question` divided by the best one)."""
        with entries.lock:
            self._refresh(store, entries)
            return self._ids, self._bm25.normalised(question)
