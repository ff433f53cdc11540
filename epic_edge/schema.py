"""The memory file's schema: tables, version, migration and what the footprint counts."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from epic_edge.crypto import Sealer

# 2: the judged-items ledger keys on 64 bits of the hash (was `seen`)
# 3: with a key, vectors and item ids are sealed as well as text (no change without one)
# 4: text is stored packed (epic_edge.text_codec) when that is shorter; older rows stay as
#    they are and read as before, so the upgrade rewrites nothing
# 5: a checksum per row of preferences, items and entries (epic_edge.row_checks); rows
#    written before keep none and are read unchecked, so the upgrade rewrites nothing
# 6: the `forgotten` table of tombstones (created empty; no row changes)
SCHEMA_VERSION = 6

# create() splits this on ";": keep semicolons out of the SQL comments
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS preferences (
    id INTEGER PRIMARY KEY, text TEXT NOT NULL UNIQUE, embedding BLOB NOT NULL,
    active INTEGER NOT NULL DEFAULT 1, created_at REAL NOT NULL, checksum BLOB);
CREATE TABLE IF NOT EXISTS items (
    id INTEGER PRIMARY KEY, text TEXT NOT NULL, source TEXT NOT NULL DEFAULT '',
    external_id TEXT NOT NULL DEFAULT '', content_hash BLOB NOT NULL UNIQUE,
    created_at REAL NOT NULL, checksum BLOB);
CREATE TABLE IF NOT EXISTS entries (
    id INTEGER PRIMARY KEY,
    item_id INTEGER NOT NULL REFERENCES items(id) ON DELETE CASCADE,
    preference_id INTEGER NOT NULL REFERENCES preferences(id) ON DELETE CASCADE,
    instruction TEXT NOT NULL, embedding BLOB NOT NULL, confidence REAL NOT NULL,
    created_at REAL NOT NULL, updated_at REAL NOT NULL, checksum BLOB,
    UNIQUE (item_id, preference_id));
CREATE INDEX IF NOT EXISTS entries_by_preference ON entries(preference_id);
-- the last LEDGER_ROWS items the verifier judged, kept or not, so they are not judged
-- (and paid for) twice under the same preferences (epoch = the preference set it was
-- judged under, seq = arrival order). Items the coarse filter dropped cost one embedding
-- and are not recorded. `key` is the first 64 bits of the content hash: a rowid table
-- with no second index, ~16 bytes a row (a collision only means one item goes unjudged)
CREATE TABLE IF NOT EXISTS judged (
    key INTEGER PRIMARY KEY, epoch INTEGER NOT NULL, seq INTEGER NOT NULL);
-- tombstones: the content hash (keyed with the memory's key when it has one, like items'
-- hashes) of every item `forget` deleted, so ingesting the same feed again does not store
-- it again unless asked (allow_forgotten). 16 bytes a row, never evicted: part of the file's
-- fixed footprint, like the preferences and the ledger
CREATE TABLE IF NOT EXISTS forgotten (hash BLOB PRIMARY KEY) WITHOUT ROWID;
"""

# footprint part -> (table, per-row byte count); text is counted in UTF-8 bytes
FOOTPRINT_SQL = {
    "items": ("items", "LENGTH(CAST(text AS BLOB)) + LENGTH(source) + LENGTH(external_id) + 16"),
    "instructions": ("entries", "LENGTH(CAST(instruction AS BLOB))"),
    "vectors": ("entries", "LENGTH(embedding)"),
    "preferences": ("preferences", "LENGTH(CAST(text AS BLOB)) + LENGTH(embedding)"),
    "ledger": ("judged", "16"),
    "forgotten": ("forgotten", "LENGTH(hash)"),
}


def ledger_key(content_hash: bytes) -> int:
    """The judged-items ledger's key for a content hash: its first 64 bits, signed."""
    return int.from_bytes(content_hash[:8], "little", signed=True)


def _meta(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
    return row[0] if row else None


def _set_version(conn: sqlite3.Connection, version: int) -> None:
    conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(version),))


def migrate(conn: sqlite3.Connection) -> None:
    """Schema 1 -> 2: drop the old `seen` ledger (hash BLOB + its index, ~90 B a row). It is
    a cache: an item it listed is judged once more if it returns. 2 -> 4 without a key and
    3 -> 4: no change to any row; an encrypted file of schema 2 waits for its key
    (seal_vectors_and_ids). 4 -> 5: add_row_checksums. 5 -> 6: the empty `forgotten` table.
    Each step leaves the next version, so a later step follows the last one here."""
    version = _meta(conn, "schema_version")
    if version is None:
        return
    if int(version) == 1:
        conn.execute("DROP TABLE IF EXISTS seen")
        _set_version(conn, version := 2)
    if int(version) == 3 or (int(version) == 2 and not _meta(conn, "key_check")):
        _set_version(conn, version := 4)
    if int(version) == 4:
        add_row_checksums(conn)
        version = 5
    if int(version) == 5:  # 5 -> 6: `forgotten` was created empty above; no row changes
        _set_version(conn, version := 6)


_CHECKSUMMED = ("preferences", "items", "entries")


def _has_checksum(conn: sqlite3.Connection, table: str) -> bool:
    return any(col[1] == "checksum" for col in conn.execute(f"PRAGMA table_info({table})"))


def has_row_checksums(conn: sqlite3.Connection) -> bool:
    """Whether the file has the checksum columns of schema 5 (a read-only open of an older
    file has not, and reads it unchecked)."""
    return all(_has_checksum(conn, table) for table in _CHECKSUMMED)


def add_row_checksums(conn: sqlite3.Connection) -> None:
    """Schema 4 -> 5: a checksum column in preferences, items and entries; the rows there
    keep NULL (unchecked), every row written from now on gets one."""
    for table in _CHECKSUMMED:
        if not _has_checksum(conn, table):
            conn.execute(f"ALTER TABLE {table} ADD COLUMN checksum BLOB")
    _set_version(conn, 5)


def seal_vectors_and_ids(conn: sqlite3.Connection, sealer: Sealer) -> None:
    """Schema 2 -> 4 of an encrypted file (its text is sealed already): seal the preference
    and entry vectors and replace item ids by their keyed hash; then on to the latest version."""
    for table in ("preferences", "entries"):
        rows = conn.execute(f"SELECT id, embedding FROM {table}").fetchall()
        conn.executemany(f"UPDATE {table} SET embedding=? WHERE id=?",
                         [(sealer.seal_bytes(blob), row_id) for row_id, blob in rows])
    rows = conn.execute("SELECT id, external_id FROM items").fetchall()
    conn.executemany("UPDATE items SET external_id=? WHERE id=?",
                     [(sealer.id_hash(x), row_id) for row_id, x in rows])
    _set_version(conn, 4)
    migrate(conn)  # 4 -> SCHEMA_VERSION


_CORE_TABLES = {"meta", "preferences", "items", "entries"}


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _holds_nothing(conn: sqlite3.Connection) -> bool:
    return not conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]


def foreign(conn: sqlite3.Connection) -> str | None:
    """Why an existing SQLite file is not a memory (another application's data), so that no
    write turns it into one; None when it is a memory (its creation may have stopped before
    the embedder was recorded) or holds nothing at all (a creation stopped between the WAL
    switch, which writes the file's header, and the schema's commit)."""
    if _holds_nothing(conn) or _CORE_TABLES <= _tables(conn):
        return None
    return "is not an epic-edge memory file (another application's data?); it was left as it is"


def unreadable(conn: sqlite3.Connection) -> str | None:
    """Why a file cannot be read as it is (read-only opens migrate nothing); None if it can."""
    tables = _tables(conn)
    if _holds_nothing(conn):
        return ("holds nothing yet (a memory whose creation stopped?): open it once for "
                "writing (e.g. `epic-edge ingest`) to finish it")
    if not _CORE_TABLES <= tables or not _meta(conn, "embedder"):
        return "is not an epic-edge memory file"
    if "judged" not in tables:
        return ("was written by an older epic-edge: open it once for writing (e.g. "
                "`epic-edge ingest`) to upgrade it")
    return None


def create(conn: sqlite3.Connection) -> None:
    """Create what is missing and bring an older file up to SCHEMA_VERSION."""
    for statement in _SCHEMA.split(";"):
        if statement.strip():
            conn.execute(statement)
    migrate(conn)
