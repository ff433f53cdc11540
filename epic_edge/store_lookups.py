"""MemoryStore's lookups of items by id and content hash: their rows, entries, preferences,
the judged-items ledger and the tombstones `forget` leaves."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from epic_edge import schema
from epic_edge.errors import DamagedRowError
from epic_edge.items import chunk_id, of_item

if TYPE_CHECKING:
    from epic_edge.crypto import Sealer


def _parts(values: list, size: int) -> Iterator[list]:
    for start in range(0, len(values), size):
        yield values[start:start + size]


class ItemLookups:
    """Read-only queries of MemoryStore (mixed in); it provides query, the sealer and
    has_table."""

    query: Callable[..., list[tuple]]
    sealer: Sealer
    has_table: Callable[[str], bool]

    def unseen(self, keys: list[bytes], epoch: int) -> set[bytes]:
        """The keys not yet judged under the current preference epoch."""
        if not keys:
            return set()
        by_key = {schema.ledger_key(k): k for k in keys}
        marks = ",".join("?" * len(by_key))
        done = self.query(f"SELECT key FROM judged WHERE epoch >= ? AND key IN ({marks})",
                          [epoch, *by_key])
        return set(keys) - {by_key[int(r[0])] for r in done}

    def entry_owners(self, ids: Iterable[int]) -> dict[int, tuple[int, str]]:
        """entry id -> (preference id, its item's id as stored)."""
        ids = list(ids)
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = self.query("SELECT e.id, e.preference_id, i.external_id FROM entries e JOIN "
                          f"items i ON i.id = e.item_id WHERE e.id IN ({marks})", ids)
        return {int(r[0]): (int(r[1]), str(r[2])) for r in rows}

    def rows_of_items(self, item_ids: Iterable[str]) -> dict[str, list[tuple[int, bytes]]]:
        """item id -> (row, content hash) of each stored item ingested under it or as one of
        its chunks "<id>#<n>" (with a key, ids are keyed hashes: looked up 256 chunks at a
        time while chunks are found)."""
        found: dict[str, list[tuple[int, bytes]]] = {i: [] for i in item_ids if i}
        if not self.sealer.enabled:
            for part in _parts(sorted(found), 200):  # ids, and ids in ["<id>#", "<id>$")
                ranges = " OR (external_id > ? AND external_id < ?)" * len(part)
                rows = self.query(
                    "SELECT id, content_hash, external_id FROM items WHERE external_id IN "
                    f"({','.join('?' * len(part))}){ranges}",
                    [*part, *(bound for i in part for bound in (f"{i}#", f"{i}$"))])
                for row, key, stored in rows:
                    owner = stored if stored in found else stored.rpartition("#")[0]
                    if owner in found and of_item(stored, owner):
                        found[owner].append((int(row), bytes(key)))
            return found
        h, start = self.sealer.id_hash, 0
        names = {h(i): i for i in found}
        while names:
            hit = set()
            for part in _parts(list(names), 500):
                for row, key, stored in self.query(
                        "SELECT id, content_hash, external_id FROM items WHERE external_id IN "
                        f"({','.join('?' * len(part))})", part):
                    found[names[stored]].append((int(row), bytes(key)))
                    hit.add(names[stored])
            more = set(found) if start == 0 else hit  # chunks run on: look at the next 256
            names = {h(chunk_id(i, n)): i for i in more for n in range(start, start + 256)}
            start += 256
        return found

    def linked_preferences(self, key: bytes) -> set[int]:
        rows = self.query(
            "SELECT e.preference_id FROM entries e JOIN items i ON i.id = e.item_id "
            "WHERE i.content_hash = ?",
            (key,),
        )
        return {int(r[0]) for r in rows}

    def preferences_holding(self, text: str) -> set[int]:
        """Ids of the preferences an item of this (whitespace-normalised) text is stored
        under, with or without an id (the items under an id are opened to compare)."""
        found = self.linked_preferences(self.sealer.content_hash(text))
        rows = self.query("SELECT i.text, e.preference_id FROM entries e JOIN items i ON "
                          "i.id = e.item_id WHERE i.external_id != ''")
        for stored, preference_id in rows:
            try:
                if self.sealer.open(stored) == text:
                    found.add(int(preference_id))
            except DamagedRowError:  # `epic-edge check` reports it
                continue
        return found

    def entries_of_items(self, item_ids: Iterable[int]) -> set[int]:
        """Ids of the entries of these items."""
        ids = list(item_ids)
        if not ids:
            return set()
        marks = ",".join("?" * len(ids))
        return {int(r[0]) for r in
                self.query(f"SELECT id FROM entries WHERE item_id IN ({marks})", ids)}

    def forgotten(self, keys: Iterable[bytes]) -> set[bytes]:
        """The content hashes among `keys` that `forget` left a tombstone for."""
        keys = list(keys)
        if not keys or not self.has_table("forgotten"):
            return set()
        marks = ",".join("?" * len(keys))
        return {bytes(r[0]) for r in
                self.query(f"SELECT hash FROM forgotten WHERE hash IN ({marks})", keys)}

    def tombstones(self) -> list[bytes]:
        """Every content hash `forget` left a tombstone for."""
        if not self.has_table("forgotten"):
            return []
        return [bytes(r[0]) for r in self.query("SELECT hash FROM forgotten ORDER BY hash")]
