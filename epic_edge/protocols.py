"""The three pluggable parts of the runtime: Embedder, Verifier and VectorIndex."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from epic_edge.errors import InvalidInputError
from epic_edge.types import Preference, Verdict


def text_list(texts: Sequence[str]) -> list[str]:
    """What every Embedder.embed accepts: a sequence of str (one bare str is a mistake)."""
    if isinstance(texts, str):
        raise InvalidInputError("embed() takes a sequence of strings, not one string")
    texts = list(texts)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise InvalidInputError(f"text {i} is {type(text).__name__}, not str")
    return texts


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 rows (cosine = inner product)."""

    dim: int

    @property
    def fingerprint(self) -> str:
        """Stable id of model + pooling + tokenizer; a memory refuses another embedder's."""
        ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return an (n, dim) float32 array with unit rows."""
        ...


@runtime_checkable
class Verifier(Protocol):
    """Confirms an item bears on some candidate preferences and writes instructions."""

    def verify(self, item: str, candidates: Sequence[Preference]) -> Verdict:
        """Decide Keep/Discard for `item` given the coarse filter's candidates."""
        ...


@runtime_checkable
class VectorIndex(Protocol):
    """Inner-product top-k search over vectors keyed by int64 ids."""

    dim: int

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None: ...

    def remove(self, ids: np.ndarray) -> int: ...

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Return (scores, ids), each (n_queries, k); missing slots have id -1."""
        ...

    def __len__(self) -> int: ...
