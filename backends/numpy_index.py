"""Exact inner-product index in plain numpy: the fallback when FAISS is not installed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


class NumpyIndex:
    """Flat inner-product search over a growing matrix; ties broken by insertion order."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._ids = np.empty(0, dtype=np.int64)
        self._vectors = np.empty((0, dim), dtype=np.float32)

    @classmethod
    def from_config(cls, config: dict[str, Any], model_dir: Path) -> NumpyIndex:
        return cls(int(config["dim"]))

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(ids), self.dim)
        self.remove(ids)  # re-adding an id replaces it, as FaissIndex does
        self._ids = np.concatenate([self._ids, ids])
        self._vectors = np.concatenate([self._vectors, vectors])

    def remove(self, ids: np.ndarray) -> int:
        mask = np.isin(self._ids, np.asarray(ids, dtype=np.int64))
        removed = int(mask.sum())
        if removed:
            self._ids = self._ids[~mask]
            self._vectors = self._vectors[~mask]
        return removed

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        queries = np.asarray(queries, dtype=np.float32).reshape(-1, self.dim)
        n = len(queries)
        scores = np.full((n, k), -np.inf, dtype=np.float32)
        ids = np.full((n, k), -1, dtype=np.int64)
        if len(self._ids) == 0 or k <= 0:
            return scores, ids
        sims = queries @ self._vectors.T
        take = min(k, len(self._ids))
        for row in range(n):
            top = np.argsort(-sims[row], kind="stable")[:take]
            scores[row, :take] = sims[row, top]
            ids[row, :take] = self._ids[top]
        return scores, ids
