"""FAISS flat inner-product index with int64 ids (IndexIDMap2 over IndexFlatIP)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.optional import optional_import


def _faiss() -> Any:
    return optional_import("faiss", "cpu", "the FAISS index (or index backend 'numpy')")


class FaissIndex:
    """Exact top-k by inner product; re-adding an id replaces its vector.

    `threads` sets FAISS's OpenMP threads (process-wide). One is right for the one-query
    searches a memory makes: with more, OpenMP start-up and contention with the embedder's
    threads turn a 0.01 ms flat search into 10 ms on a busy 2-core machine.
    """

    def __init__(self, dim: int, threads: int = 1) -> None:
        faiss = _faiss()
        if threads > 0:
            faiss.omp_set_num_threads(threads)
        self.dim = dim
        self._index = faiss.IndexIDMap2(faiss.IndexFlatIP(dim))

    @classmethod
    def from_config(cls, config: dict[str, Any], model_dir: Path) -> FaissIndex:
        return cls(int(config["dim"]), int(config.get("threads", 1)))

    def __len__(self) -> int:
        return int(self._index.ntotal)

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        ids = np.ascontiguousarray(ids, dtype=np.int64).reshape(-1)
        if len(ids) == 0:
            return
        vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(ids), self.dim)
        self.remove(ids)  # add_with_ids accepts duplicates silently
        self._index.add_with_ids(vectors, ids)

    def remove(self, ids: np.ndarray) -> int:
        ids = np.ascontiguousarray(ids, dtype=np.int64).reshape(-1)
        if len(ids) == 0 or self._index.ntotal == 0:
            return 0
        return int(self._index.remove_ids(ids))

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        queries = np.ascontiguousarray(queries, dtype=np.float32).reshape(-1, self.dim)
        n = len(queries)
        if self._index.ntotal == 0 or k <= 0:
            return np.full((n, k), -np.inf, np.float32), np.full((n, k), -1, np.int64)
        scores, ids = self._index.search(queries, k)
        scores[ids < 0] = -np.inf
        return scores, ids
