"""The memory file: one SQLite database (WAL) holding preferences, items and entries."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from epic_edge import schema
from epic_edge.crypto import Sealer
from epic_edge.errors import EmbedderMismatchError, MemoryFileError
from epic_edge.sqlite_file import SQLiteFile
from epic_edge.store_lookups import ItemLookups
from epic_edge.store_reads import CheckedReads
from epic_edge.store_writes import StoreWrites
from epic_edge.types import Preference
from epic_edge.vectors import (
    LEGACY_ENTRY_VECTOR,
    check_entry_vector,
    check_format,
    decode,
)


def from_blob(blob: bytes, dim: int, fmt: str = "float32") -> np.ndarray:
    return decode(blob, dim, fmt)


class MemoryStore(ItemLookups, StoreWrites, CheckedReads, SQLiteFile):
    """The memory's schema over a SQLiteFile: opening, meta and reads here (each row checked
    against its checksum: CheckedReads); the writes made inside `transaction()` in
    StoreWrites."""

    def __init__(
        self, path: str | Path, *, key: bytes | None = None, timeout: float = 10.0,
        read_only: bool = False,
    ) -> None:
        super().__init__(path, timeout=timeout, read_only=read_only)
        self.sealer = Sealer(key)
        try:
            if read_only:
                self._check_readable()
            else:
                with self.transaction() as conn:
                    schema.create(conn)
            self._check_key()
            # with a key, vectors and item ids are sealed too from schema 3 on (a new file)
            version = self.get_meta("schema_version")
            self.vectors_sealed = self.sealer.enabled and int(version or 3) >= 3
            if self.sealer.enabled and not self.vectors_sealed and not read_only:
                with self.transaction() as conn:
                    schema.seal_vectors_and_ids(conn, self.sealer)
                self.vacuum()  # no clear copy of a vector or id stays in free pages or the WAL
                self.vectors_sealed = True
            with self._lock, self._translate():
                self.checksummed = schema.has_row_checksums(self.conn)
        except BaseException:
            self.conn.close()
            raise
        self._vector_format: str | None = None

    def foreign(self, conn: sqlite3.Connection) -> str | None:
        return schema.foreign(conn)

    def _check_readable(self) -> None:
        """A read-only open changes nothing: the file must be a memory in a layout read here."""
        with self._lock, self._translate():
            problem = schema.unreadable(self.conn)
        if problem:
            raise MemoryFileError(f"{self.path} {problem}")

    def _check_key(self) -> None:
        token = self.get_meta("key_check")
        mine = self.sealer.check_token()
        if token is None:
            if self.count("preferences") or self.count("items"):
                if self.sealer.enabled:
                    raise MemoryFileError(f"{self.path} is not encrypted; open it without a key")
                return
            if not self.read_only:
                with self.transaction() as conn:
                    self.set_meta(conn, "key_check", mine)
        elif token != mine:
            raise MemoryFileError(
                f"{self.path} is encrypted: open it with its key" if token and not mine
                else f"{self.path}: wrong key" if token
                else f"{self.path} is not encrypted; open it without a key"
            )

    # -- transactions and meta ----------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        rows = self.query("SELECT value FROM meta WHERE key=?", (key,))
        return rows[0][0] if rows else None

    def set_meta(self, conn: sqlite3.Connection, key: str, value: object) -> None:
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, str(value)))

    def bind_embedder(
        self, fingerprint: str, dim: int, tau: float, vector_format: str = "float32",
        entry_vector: str = LEGACY_ENTRY_VECTOR,
    ) -> None:
        """Record the embedder on a new file; refuse a file built by another one."""
        version = self.get_meta("schema_version")
        if version is not None and int(version) > schema.SCHEMA_VERSION:
            raise MemoryFileError(
                f"{self.path} has schema version {version}; this epic-edge reads up to "
                f"{schema.SCHEMA_VERSION}: upgrade epic-edge"
            )
        stored = self.get_meta("embedder")
        if stored is None:
            with self.transaction() as conn:
                self.set_meta(conn, "schema_version", schema.SCHEMA_VERSION)
                self.set_meta(conn, "embedder", fingerprint)
                self.set_meta(conn, "dim", dim)
                self.set_meta(conn, "tau", tau)
                self.set_meta(conn, "vector_format", check_format(vector_format))
                self.set_meta(conn, "entry_vector", check_entry_vector(entry_vector))
                self.set_meta(conn, "epoch", 0)
                self.set_meta(conn, "created_at", time.time())
            self._vector_format = None
        elif stored != fingerprint or int(self.get_meta("dim") or -1) != dim:
            raise EmbedderMismatchError(
                f"{self.path} was built with embedder {stored!r}; it cannot be read with "
                f"{fingerprint!r} (vectors from different embedders are not comparable). "
                "Open it with the same embedder or build a new memory."
            )

    @property
    def vector_format(self) -> str:
        """How entry vectors are stored: float32, float16 or int8 (fixed at creation)."""
        if self._vector_format is None:
            self._vector_format = self.get_meta("vector_format") or "float32"
        return self._vector_format

    @property
    def entry_vector(self) -> str:
        """What entries are indexed by (fixed at creation): item, instruction or both."""
        return self.get_meta("entry_vector") or LEGACY_ENTRY_VECTOR

    @property
    def epoch(self) -> int:
        return int(self.get_meta("epoch") or 0)

    # -- reads --------------------------------------------------------------------------
    def preferences(self, dim: int) -> tuple[list[Preference], np.ndarray]:
        def one(row: tuple) -> tuple[Preference, np.ndarray]:
            return (Preference(int(row[0]), self.sealer.open(row[1])),
                    from_blob(self.open_vector(row[2]), dim))

        rows = self.intact_rows("preferences", tail="WHERE active=1 ORDER BY id")
        read = [self.checked("preferences", r[0], r[1:], None, one, r) for r in rows]
        read = [pair for pair in read if pair is not None]
        vectors = np.stack([v for _, v in read]) if read else np.empty((0, dim))
        return [p for p, _ in read], vectors.astype(np.float32)

    def entry_vectors(self, dim: int) -> tuple[np.ndarray, np.ndarray]:
        fmt = self.vector_format
        read = [(r[0], self.checked("entries", r[0], r[1:], None, self.entry_vector_of, r[4],
                                    dim, fmt))
                for r in self.intact_rows("entries", tail="ORDER BY id")]
        read = [(i, v) for i, v in read if v is not None]
        ids = np.array([i for i, _ in read], dtype=np.int64)
        vectors = np.stack([v for _, v in read]) if read else np.empty((0, dim))
        return ids, vectors.astype(np.float32)

    def entry_vector_of(self, blob: bytes, dim: int, fmt: str) -> np.ndarray:
        return decode(self.open_vector(blob), dim, fmt)

    def open_vector(self, blob: bytes) -> bytes:
        """A stored vector's bytes, unsealed when the file seals them."""
        return self.sealer.open_bytes(blob) if self.vectors_sealed else blob

    def seal_vector(self, blob: bytes) -> bytes:
        return self.sealer.seal_bytes(blob) if self.vectors_sealed else blob

    def entry_texts(self) -> dict[int, str]:
        """entry id -> its item's text, for every entry."""
        return {e.entry_id: e.item_text for e in self.checked_entries("")}

    def entry_confidences(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(entry ids, sorted; the preference id each is filed under; its confidence)."""
        rows = self.query("SELECT id, preference_id, confidence FROM entries ORDER BY id")
        return (np.array([r[0] for r in rows], np.int64), np.array([r[1] for r in rows], np.int64),
                np.array([r[2] for r in rows], np.float64))

    def entries_by_id(self, ids: Iterable[int]) -> dict[int, tuple]:
        """entry id -> (id, instruction, confidence, item text, source, pref id, pref text,
        item id, item's external id as stored)."""
        ids = [int(i) for i in ids]
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        return {e.entry_id: (e.entry_id, e.instruction, e.confidence, e.item_text, e.source,
                             e.preference.id, e.preference.text, e.item_id, e.external_id)
                for e in self.checked_entries(f"WHERE e.id IN ({marks})", ids)}

    def has_table(self, table: str) -> bool:
        """Whether the file has `table` (a file of an older schema, opened read-only, may not)."""
        return bool(self.query("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?",
                               (table,)))

    def count(self, table: str) -> int:
        if table not in {"preferences", "items", "entries", "judged", "forgotten"}:
            raise ValueError(table)
        if not self.has_table(table):
            return 0
        return int(self.query(f"SELECT COUNT(*) FROM {table}")[0][0])

    def footprint(self) -> dict[str, int]:
        """Bytes on disk by part; `overhead` is pages, indexes and free space."""
        total = self.file_bytes()
        parts = {part: int(self.query(f"SELECT COALESCE(SUM({expr}), 0) FROM {table}")[0][0])
                 if self.has_table(table) else 0
                 for part, (table, expr) in schema.FOOTPRINT_SQL.items()}
        parts["overhead"] = max(total - sum(parts.values()), 0)
        parts["total"] = total
        return parts

