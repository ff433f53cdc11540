"""The memory file's writes, each inside a transaction: preferences, items, entries, ledger."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from epic_edge import schema
from epic_edge.row_checks import columns, intact, row_sum
from epic_edge.vectors import encode

# The judged-items ledger stays bounded so a long stream does not grow the file.
LEDGER_ROWS = 2048


@dataclass(frozen=True)
class NewEntry:
    """An entry waiting to be written: one kept (item, preference) pair."""

    item_key: bytes
    preference_id: int
    instruction: str
    embedding: np.ndarray
    confidence: float


class StoreWrites:
    """MemoryStore's writes (and the reads they depend on) on the connection `conn` of its
    `transaction()`, so they see what other writers committed first. MemoryStore provides
    the sealer, the meta table, the epoch and the vector format they use."""

    def preference_ids(self, conn: sqlite3.Connection) -> set[int]:
        return {int(r[0]) for r in conn.execute("SELECT id FROM preferences")}

    def preference_ids_by_text(self, conn: sqlite3.Connection) -> dict[str, int]:
        rows = conn.execute("SELECT id, text FROM preferences").fetchall()
        opened = ((self.checked("preferences", pid, (), None, self.sealer.open, text), pid)
                  for pid, text in rows)  # its checksum: read by preferences()
        return {text: int(pid) for text, pid in opened if text is not None}

    def insert_preference(self, conn: sqlite3.Connection, text: str, vector: np.ndarray) -> int:
        cells = (self.sealer.seal(text), self.seal_vector(encode(vector, "float32")))
        cur = conn.execute(
            "INSERT INTO preferences(text, embedding, created_at, checksum) VALUES (?, ?, ?, ?)",
            (*cells, time.time(), row_sum(cells)),
        )
        # a new preference may make old items relevant: judge them again when they return
        self.set_meta(conn, "epoch", self.epoch + 1)
        return int(cur.lastrowid)

    def delete_preference(self, conn: sqlite3.Connection, preference_id: int) -> list[int]:
        """Delete a preference, its entries, and items left with no entry; return entry ids."""
        entry_ids = [
            int(r[0])
            for r in conn.execute("SELECT id FROM entries WHERE preference_id=?", (preference_id,))
        ]
        conn.execute("DELETE FROM entries WHERE preference_id=?", (preference_id,))
        conn.execute("DELETE FROM preferences WHERE id=?", (preference_id,))
        conn.execute("DELETE FROM items WHERE id NOT IN (SELECT DISTINCT item_id FROM entries)")
        return entry_ids

    def delete_items(self, conn: sqlite3.Connection, item_ids: list[int]) -> list[int]:
        """Delete items and their entries; return the entry ids removed. The items leave the
        judged-items ledger too, so an old version that comes back is judged again."""
        entry_ids: list[int] = []
        for item_id in item_ids:
            entry_ids += [int(r[0]) for r in
                          conn.execute("SELECT id FROM entries WHERE item_id=?", (item_id,))]
            for (key,) in conn.execute("SELECT content_hash FROM items WHERE id=?", (item_id,)):
                conn.execute("DELETE FROM judged WHERE key=?", (schema.ledger_key(bytes(key)),))
            conn.execute("DELETE FROM entries WHERE item_id=?", (item_id,))
            conn.execute("DELETE FROM items WHERE id=?", (item_id,))
        return entry_ids

    def _refresh(self, conn: sqlite3.Connection, refresh: dict[int, float], now: float) -> None:
        """Raise entries' confidence to at least the given one (a near-duplicate came again),
        with their checksums; a damaged entry is left as it is (`check` reports it)."""
        marks = ",".join("?" * len(refresh))
        rows = conn.execute(f"SELECT id, {columns('entries')}, checksum FROM entries WHERE id "
                            f"IN ({marks})", list(refresh)).fetchall() if refresh else []
        updates = []
        for entry_id, *cells, checksum in rows:
            if intact(cells, checksum):
                cells[-1] = max(float(cells[-1]), float(refresh[entry_id]))
                updates.append((cells[-1], now, row_sum(cells), entry_id))
        conn.executemany("UPDATE entries SET confidence = ?, updated_at = ?, checksum = ? "
                         "WHERE id = ?", updates)

    def add_tombstones(self, conn: sqlite3.Connection, keys: Iterable[bytes]) -> None:
        """Remember that the items of these content hashes were forgotten (store.forgotten)."""
        conn.executemany("INSERT OR IGNORE INTO forgotten(hash) VALUES (?)",
                         [(bytes(k),) for k in keys])

    def write_batch(
        self,
        conn: sqlite3.Connection,
        items: dict[bytes, tuple[str, str, str]],
        entries: list[NewEntry],
        judged: Iterable[bytes],
        epoch: int,
        refresh: dict[int, float] | None = None,
        unforget: Iterable[bytes] = (),
    ) -> list[int]:
        """Store kept items and their entries and record the verifier's judged items in the
        bounded ledger (the oldest rows beyond LEDGER_ROWS leave it); the tombstones of
        `unforget` (forgotten items offered again with allow_forgotten) go.

        `items` maps content hash -> (text, source, external id). Returns the new entry ids
        in the order of `entries`.
        """
        now = time.time()
        rows = [(self.sealer.seal(t), self.sealer.seal(s), self.sealer.id_hash(x), key)
                for key, (t, s, x) in items.items()]
        conn.executemany("DELETE FROM forgotten WHERE hash = ?", [(bytes(k),) for k in unforget])
        conn.executemany(
            "INSERT OR IGNORE INTO items(text, source, external_id, content_hash, created_at, "
            "checksum) VALUES (?, ?, ?, ?, ?, ?)", [(*row, now, row_sum(row)) for row in rows])
        new_ids: list[int] = []
        for entry in entries:
            item_id = conn.execute(
                "SELECT id FROM items WHERE content_hash=?", (entry.item_key,)
            ).fetchone()[0]
            cells = (item_id, entry.preference_id, self.sealer.seal(entry.instruction),
                     self.seal_vector(encode(entry.embedding, self.vector_format)),
                     float(entry.confidence))
            cur = conn.execute(
                "INSERT INTO entries(item_id, preference_id, instruction, embedding, confidence, "
                "created_at, updated_at, checksum) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(item_id, preference_id) DO UPDATE SET "
                "instruction=excluded.instruction, embedding=excluded.embedding, "
                "confidence=excluded.confidence, checksum=excluded.checksum, updated_at=? "
                "RETURNING id", (*cells, now, now, row_sum(cells), now),
            )
            new_ids.append(int(cur.fetchone()[0]))
        self._refresh(conn, refresh or {}, now)
        seq = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM judged").fetchone()[0]
        conn.executemany(
            "INSERT OR REPLACE INTO judged(key, epoch, seq) VALUES (?, ?, ?)",
            [(schema.ledger_key(key), epoch, seq + n) for n, key in enumerate(judged, 1)],
        )
        conn.execute("DELETE FROM judged WHERE seq <= (SELECT MAX(seq) FROM judged) - ?",
                     (LEDGER_ROWS,))
        return new_ids
