"""The item gate's yardstick: what questions that bear on no preference find in a memory.

A question far from every preference may still be the user's ("Where should we eat tonight?"
for a vegan whose memory holds a vegan bistro). Its evidence is its best entry's score, but a
fixed score cut means different things in a memory of 3 entries and one of 3,000: the more
entries, the higher an unrelated question's best score climbs by chance. So the cut is set per
memory: the `quantile` of the best-entry scores that the shipped background questions (general
knowledge, arithmetic, definitions, chit-chat) reach in this memory. A question whose best
entry beats, say, 95% of them carries evidence an unrelated question does not.
"""

from __future__ import annotations

import threading
from importlib import resources

import numpy as np

from epic_edge.errors import InvalidInputError

_VECTORS: dict[str, np.ndarray] = {}  # embedder fingerprint -> background question vectors
_VECTORS_LOCK = threading.Lock()


def background_questions() -> list[str]:
    """The shipped background questions (epic_edge/data/background_questions.txt)."""
    text = resources.files("epic_edge").joinpath("data", "background_questions.txt").read_text(
        encoding="utf-8")
    return [line.strip() for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def background_vectors(embedder) -> np.ndarray:  # type: ignore[no-untyped-def]
    """The background questions embedded once per embedder (per process)."""
    key = str(getattr(embedder, "fingerprint", id(embedder)))
    with _VECTORS_LOCK:
        if key not in _VECTORS:
            _VECTORS[key] = np.asarray(embedder.embed(background_questions()), np.float32)
        return _VECTORS[key]


def item_threshold(best_scores: np.ndarray, quantile: float) -> float:
    """The cut from the background questions' best-entry scores in one memory."""
    return float(np.quantile(np.asarray(best_scores, np.float64), quantile))


class BackgroundGate:
    """The per-memory item-gate cut, recomputed only after the memory's entries change."""

    def __init__(self, quantile: float) -> None:
        if not 0.0 < float(quantile) < 1.0:
            raise InvalidInputError(f"item_gate_quantile must be between 0 and 1, got {quantile}")
        self.quantile = float(quantile)
        self._cut: tuple[int, float] | None = None  # (entry index version, cut)

    def threshold(self, embedder, entries) -> float | None:  # type: ignore[no-untyped-def]
        """The cut for this memory's EntryIndex (None while it holds no entries)."""
        with entries.lock:
            if not len(entries):
                return None
            if self._cut is None or self._cut[0] != entries.version:
                scores, _ = entries.search(background_vectors(embedder), 1)
                self._cut = (entries.version, item_threshold(scores[:, 0], self.quantile))
            return self._cut[1]
