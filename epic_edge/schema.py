"""The memory file's schema: tables, version, migration and what the footprint counts."""

from __future__ import annotations

import sqlite3

SCHEMA_VERSION = 2  # 2: the judged-items ledger keys on 64 bits of the hash (was `seen`)

# create() splits this on ";": keep semicolons out of the SQL comments
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS preferences (
    id INTEGER PRIMARY KEY, text TEXT NOT NULL UNIQUE, embedding BLOB NOT NULL,
    active INTEGER NOT NULL DEFAULT 1, created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS items (
    id INTEGER PRIMARY KEY, text TEXT NOT NULL, source TEXT NOT NULL DEFAULT '',
    external_id TEXT NOT NULL DEFAULT '', content_hash BLOB NOT NULL UNIQUE,
    created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS entries (
    id INTEGER PRIMARY KEY,
    item_id INTEGER NOT NULL REFERENCES items(id) ON DELETE CASCADE,
    preference_id INTEGER NOT NULL REFERENCES preferences(id) ON DELETE CASCADE,
    instruction TEXT NOT NULL, embedding BLOB NOT NULL, confidence REAL NOT NULL,
    created_at REAL NOT NULL, updated_at REAL NOT NULL, UNIQUE (item_id, preference_id));
CREATE INDEX IF NOT EXISTS entries_by_preference ON entries(preference_id);
-- the last LEDGER_ROWS items the verifier judged, kept or not, so they are not judged
-- (and paid for) twice under the same preferences (epoch = the preference set it was
-- judged under, seq = arrival order). Items the coarse filter dropped cost one embedding
-- and are not recorded. `key` is the first 64 bits of the content hash: a rowid table
-- with no second index, ~16 bytes a row (a collision only means one item goes unjudged)
CREATE TABLE IF NOT EXISTS judged (
    key INTEGER PRIMARY KEY, epoch INTEGER NOT NULL, seq INTEGER NOT NULL);
"""

# footprint part -> (table, per-row byte count); text is counted in UTF-8 bytes
FOOTPRINT_SQL = {
    "items": ("items", "LENGTH(CAST(text AS BLOB)) + LENGTH(source) + LENGTH(external_id) + 16"),
    "instructions": ("entries", "LENGTH(CAST(instruction AS BLOB))"),
    "vectors": ("entries", "LENGTH(embedding)"),
    "preferences": ("preferences", "LENGTH(CAST(text AS BLOB)) + LENGTH(embedding)"),
    "ledger": ("judged", "16"),
}


def ledger_key(content_hash: bytes) -> int:
    """The judged-items ledger's key for a content hash: its first 64 bits, signed."""
    return int.from_bytes(content_hash[:8], "little", signed=True)


def migrate(conn: sqlite3.Connection) -> None:
    """Schema 1 -> 2: drop the old `seen` ledger (hash BLOB + its index, ~90 B a row). It is
    a cache: an item it listed is judged once more if it returns."""
    version = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    if version is not None and int(version[0]) == 1:
        conn.execute("DROP TABLE IF EXISTS seen")
        conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),))


def create(conn: sqlite3.Connection) -> None:
    """Create what is missing and bring an older file up to SCHEMA_VERSION."""
    for statement in _SCHEMA.split(";"):
        if statement.strip():
            conn.execute(statement)
    migrate(conn)
