"""Store-everything RAG: every item and its embedding in SQLite, the paper's baseline."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from epic_edge.crypto import Sealer
from epic_edge.protocols import Embedder
from epic_edge.types import Item
from epic_edge.vectors import check_format, encode


class StoreEverything:
    """Keeps every item, embedded as is; measured the same way as a Memory (bytes on disk).

    Vectors are stored as float32 and text as it is (the paper's baseline) unless
    `vector_format` says otherwise ("float16", "int8": the formats a Memory can use) and
    `packed_text` packs text as a Memory does (epic_edge.text_codec).
    """

    def __init__(self, path: str | Path, embedder: Embedder,
                 vector_format: str = "float32", packed_text: bool = False) -> None:
        self.path = Path(path)
        self.embedder = embedder
        self.vector_format = check_format(vector_format)
        self.packed_text = packed_text
        self.conn = sqlite3.connect(str(self.path))
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS items (id INTEGER PRIMARY KEY, text TEXT NOT NULL, "
            "source TEXT NOT NULL DEFAULT '', embedding BLOB NOT NULL)"
        )
        self._texts: list[str] = []
        self._vectors = np.empty((0, embedder.dim), dtype=np.float32)

    def add(self, items: Sequence[Item], vectors: np.ndarray | None = None) -> None:
        """Store items; pass `vectors` when they were already embedded."""
        if vectors is None:
            vectors = self.embedder.embed([it.text for it in items])
        stored = Sealer().seal if self.packed_text else str  # a Memory's form of text, or as is
        with self.conn:
            self.conn.executemany(
                "INSERT INTO items(text, source, embedding) VALUES (?, ?, ?)",
                [(stored(it.text), it.source, encode(v, self.vector_format))
                 for it, v in zip(items, vectors)],
            )
        self._texts.extend(it.text for it in items)
        self._vectors = np.concatenate([self._vectors, np.asarray(vectors, np.float32)])

    def search(self, query_vector: np.ndarray, k: int = 5) -> list[tuple[float, str]]:
        sims = self._vectors @ np.asarray(query_vector, np.float32).reshape(-1)
        top = np.argsort(-sims, kind="stable")[:k]
        return [(float(sims[i]), self._texts[i]) for i in top]

    def footprint(self) -> int:
        """Bytes on disk after a checkpoint."""
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        wal = Path(f"{self.path}-wal")
        return self.path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)

    def close(self) -> None:
        self.conn.close()
