"""EntryIndex: a memory's vector index, its lock, the entry ids it holds and their vector format."""

from __future__ import annotations

import threading
from collections.abc import Iterable

import numpy as np

from epic_edge.protocols import VectorIndex
from epic_edge.vectors import decode, encode


class EntryIndex:
    """The entry vectors a memory searches, kept equal to what its file holds.

    `lock` (re-entrant) guards the index and is the memory's lock: ingest holds it while it
    commits a batch and adds its vectors, so a reader never sees one without the other.
    Vectors are searched as the file stores them (float16 / int8 round-trips), as after a
    reopen.
    """

    def __init__(self, index: VectorIndex, dim: int, vector_format: str = "float32") -> None:
        self.index = index
        self.dim = int(dim)
        self.vector_format = vector_format
        self.lock = threading.RLock()
        self._ids = np.empty(0, dtype=np.int64)
        self.version = 0  # bumped on every change: what caches of the entries key on

    def __len__(self) -> int:
        return len(self.index)

    @property
    def ids(self) -> np.ndarray:
        """The entry ids the index holds (sorted)."""
        return self._ids.copy()

    def replace_all(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Drop what the index holds and load `vectors` as read from the file."""
        with self.lock:
            self.index.remove(self._ids)
            self.index.add(ids, vectors)
            self._ids = np.asarray(ids, dtype=np.int64)
            self.version += 1

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Index new entries' vectors, in the form the file stores them."""
        fmt = self.vector_format
        if fmt != "float32" and len(vectors):
            vectors = np.stack([decode(encode(v, fmt), self.dim, fmt) for v in vectors])
        with self.lock:
            self.index.add(ids, vectors)
            self._ids = np.union1d(self._ids, ids)
            self.version += 1

    def remove(self, entry_ids: Iterable[int]) -> None:
        gone = np.asarray(list(entry_ids), dtype=np.int64)
        with self.lock:
            self.index.remove(gone)
            self._ids = self._ids[~np.isin(self._ids, gone)]
            self.version += 1

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, ids) of the top k entries for each query row; missing slots have id -1."""
        with self.lock:
            return self.index.search(np.asarray(queries, np.float32).reshape(-1, self.dim), k)

    def best_score(self, query: np.ndarray) -> float:
        """The best entry's score for one query vector (-1 for an empty index)."""
        scores, ids = self.search(query, 1)
        return float(scores[0][0]) if len(ids[0]) and ids[0][0] >= 0 else -1.0
