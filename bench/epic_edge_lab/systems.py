"""The five systems the quality and stream benches compare, behind one small interface."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.baseline import StoreEverything
from epic_edge.memory import Memory
from epic_edge.settings import MemorySettings
from epic_edge.stages import normalize_rows
from epic_edge.types import Item

SYSTEMS = ("store-everything", "store-everything+steer", "coarse", "coarse+fine", "epic")
LABELS = {
    "store-everything": "store-everything RAG (raw query)",
    "store-everything+steer": "store-everything + steering",
    "coarse": "coarse filter only (C)",
    "coarse+fine": "coarse + fine (C+F)",
    "epic": "coarse + fine + steering (EPIC)",
}


def steer_vector(q: np.ndarray, pref_vectors: np.ndarray) -> tuple[np.ndarray, int]:
    """q~ = normalise(q + E(p*)), p* = argmax_p q·E(p); the same rule as the core's Steering."""
    best = int(np.argmax(pref_vectors @ q))
    return normalize_rows(q + pref_vectors[best]), best


class RawItems:
    """Store-everything (or coarse-only) over raw items; hits carry the fixed assigner's links.

    `links[i]` is P_rel of item i at tau, as preference keys; the same assigner for every
    raw-item system, so PAP weighting is applied equally to all of them.
    """

    def __init__(self, path: Path, embedder: Any, items: Sequence[Item], vectors: np.ndarray,
                 links: Sequence[frozenset]) -> None:
        start = time.perf_counter()
        self.store = StoreEverything(path, embedder)
        self.store.add(list(items), vectors)
        self.index_seconds = time.perf_counter() - start
        self.embedder = embedder
        self.relink(items, links)

    def relink(self, items: Sequence[Item], links: Sequence[frozenset]) -> None:
        """Set each item's links (the fixed assigner's P_rel under the current preferences)."""
        self._links = {it.text: links[i] for i, it in reversed(list(enumerate(items)))}
        self.linked = set().union(*links) if len(links) else set()

    def retrieve(self, question: str, k: int, pref_vectors: np.ndarray | None,
                 ) -> tuple[list[tuple[None, frozenset]], dict[str, float]]:
        """Top-k raw items for a question (steered when pref_vectors is given), with timings."""
        t0 = time.perf_counter()
        q = self.embedder.embed([question])[0]
        t1 = time.perf_counter()
        if pref_vectors is not None:
            q = steer_vector(q, pref_vectors)[0]
        t2 = time.perf_counter()
        found = self.store.search(q, k)
        t3 = time.perf_counter()
        hits = [(None, self._links.get(text, frozenset())) for _, text in found]
        return hits, {"embed": t1 - t0, "steer": t2 - t1, "search": t3 - t2}

    def bytes(self) -> int:
        return self.store.footprint()

    def close(self) -> None:
        self.store.close()


class Borrowed:
    """A verifier lent to one memory after another: closing a memory leaves it open."""

    def __init__(self, verifier: Any) -> None:
        self.inner = verifier

    @property
    def keep_score(self) -> Any:
        return getattr(self.inner, "keep_score", None)

    def verify(self, item: str, candidates: Sequence[Any], **options: Any) -> Any:
        return self.inner.verify(item, candidates, **options)


class EpicMemory:
    """A real epic_edge Memory (C+F when queried raw, EPIC when steered)."""

    def __init__(self, path: Path, profile: Any, embedder: Any, verifier: Any, tau: float,
                 preferences: Sequence[str]) -> None:
        self.memory = Memory.open(path, profile, embedder=embedder, verifier=verifier, tau=tau)
        # the profile's gate and ranking whatever embedder the bench is handed (Memory.open
        # keeps them for the profile's model only; tests hand a stand-in); hedge and weight
        # are read when the preferences load below. The bench calibrates the background cut
        # itself (bench/epic_edge_lab/policy.py). The question gate reads the embedder's own
        # vectors: it stays only where Memory.open kept it (the profile's model)
        self.memory.settings = MemorySettings.from_retrieval(
            getattr(profile, "retrieval", {}) or {}, k=self.memory.settings.k
        ).replace(item_gate_quantile=None, question_gate=self.memory.settings.question_gate)
        self.prefs = self.memory.add_preferences(preferences)
        self._item_links: dict[str, frozenset] = {}
        self.stages: dict[str, float] = {}
        self.llm_calls = self.verified = self.kept = self.evicted = 0
        self.index_seconds = 0.0

    def ingest(self, items: Sequence[Item], batch_size: int = 256) -> None:
        start = time.perf_counter()
        for stats in self.memory.ingest_batches(items, batch_size):
            for stage, secs in stats.seconds.items():
                self.stages[stage] = self.stages.get(stage, 0.0) + secs
            self.llm_calls += stats.llm_calls
            self.verified += stats.verified
            self.kept += stats.kept
            self.evicted += stats.evicted
        self.index_seconds += time.perf_counter() - start
        self.refresh()

    def refresh(self) -> None:
        """Re-read which preferences each stored item links to (after ingest or removal)."""
        self._item_links = self._links_by_item()

    def _links_by_item(self) -> dict[str, frozenset]:
        rows = self.memory.store.conn.execute(
            "SELECT i.text, e.preference_id FROM entries e JOIN items i ON i.id = e.item_id"
        ).fetchall()
        links: dict[str, set] = {}
        for text, pid in rows:
            links.setdefault(self.memory.store.sealer.open(text), set()).add(int(pid))
        return {t: frozenset(s) for t, s in links.items()}

    @property
    def linked(self) -> set[int]:
        return set().union(*self._item_links.values()) if self._item_links else set()

    def retrieve(self, question: str, k: int, steer: bool,
                 ) -> tuple[list[tuple[int, frozenset]], dict[str, float]]:
        timings: dict[str, float] = {}
        found = self.memory.retrieve(question, k, steer=steer, timings=timings)
        hits = [(h.preference.id, self._item_links.get(h.item_text, frozenset({h.preference.id})))
                for h in found]
        return hits, timings

    def bytes(self) -> int:
        return int(self.memory.footprint()["total"])

    def close(self) -> None:
        self.memory.close()
