"""Retrieval variants over one EPIC memory's kept entries, compared on the judged set.

Each variant ranks the same entries (the items the memory kept, filed under a preference);
they differ in what an entry is indexed by and how a question is routed:

- `item+steer`: the item's own vector, question steered to its closest preference
- `item+hedge`: the item's vector, question steered to a softmax mix of preferences
- `sum+steer`: normalise(E(item) + E(instruction)) per entry, steered question
- `item`: the item's vector, raw question (no steering)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from epic_edge.stages import Steering, normalize_rows
from epic_edge.types import Preference

VARIANTS = ("item+steer", "item+hedge", "sum+steer", "item")
HEDGE_TEMPERATURE = 0.05


def hedge_vector(q: np.ndarray, pref_vectors: np.ndarray,
                 temperature: float = HEDGE_TEMPERATURE) -> np.ndarray:
    """The core's hedged steering (Steering with hedge=T) over bare preference vectors."""
    prefs = [Preference(n, "") for n in range(len(pref_vectors))]
    return Steering(prefs, pref_vectors, hedge=temperature).steer(q)[0]


class KeptEntries:
    """The entries of an opened Memory with item and instruction vectors, ranked in memory."""

    def __init__(self, memory: Any, embedder: Any) -> None:
        ids, inst_vectors = memory.store.entry_vectors(memory.embedder.dim)
        rows = memory.store.entries_by_id(ids)
        self.texts = [rows[int(i)][3] for i in ids]
        self.preference_ids = [rows[int(i)][5] for i in ids]
        self.item_vectors = (embedder.embed(self.texts) if self.texts
                             else np.empty((0, memory.embedder.dim), np.float32))
        self.sum_vectors = (normalize_rows(self.item_vectors + inst_vectors) if self.texts
                            else self.item_vectors)

    def __len__(self) -> int:
        return len(self.texts)

    def rank(self, variant: str, q: np.ndarray, pref_vectors: np.ndarray,
             k: int) -> list[tuple[float, str]]:
        """Top-k (score, item text) for a unit question vector under `variant`."""
        if not self.texts:
            return []
        if variant == "item":
            query, vectors = q, self.item_vectors
        elif variant == "item+hedge":
            query, vectors = hedge_vector(q, pref_vectors), self.item_vectors
        else:
            best = int(np.argmax(pref_vectors @ q))
            query = normalize_rows(q + pref_vectors[best])
            vectors = self.item_vectors if variant == "item+steer" else self.sum_vectors
        scores = vectors @ np.asarray(query, np.float32).reshape(-1)
        top = np.argsort(-scores, kind="stable")
        out: list[tuple[float, str]] = []
        seen: set[str] = set()
        for i in top:  # an item kept under two preferences is one passage
            if self.texts[i] not in seen:
                seen.add(self.texts[i])
                out.append((float(scores[i]), self.texts[i]))
            if len(out) == k:
                break
        return out

    def best_item_score(self, q: np.ndarray) -> float:
        """max over kept items of E(q)·E(item): retrieval evidence for the memory-use gate."""
        return float((self.item_vectors @ q).max()) if self.texts else -1.0


def texts_only(ranked: Sequence[tuple[float, str]]) -> list[str]:
    return [text for _, text in ranked]
