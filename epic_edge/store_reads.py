"""MemoryStore's reads that check each row against its checksum: a damaged row is skipped."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from epic_edge.errors import DamagedRowError
from epic_edge.instructions import read_form
from epic_edge.row_checks import CHECKED, columns, intact
from epic_edge.types import Preference

log = logging.getLogger(__name__)
T = TypeVar("T")
_ENTRY_JOIN = ("FROM entries e JOIN items i ON i.id = e.item_id "
               "JOIN preferences p ON p.id = e.preference_id")


@dataclass(frozen=True)
class Entry:
    """One stored entry: an item kept for a preference, with its usage instruction.

    `item_id` is the item's number in this memory (what `forget` takes); `external_id` is
    the id the item was ingested with ("" when none). Read with its row, its item's and its
    preference's checked (CheckedReads.checked_entries).
    """

    entry_id: int
    item_id: int
    external_id: str
    item_text: str
    source: str
    preference: Preference
    instruction: str
    confidence: float
    created_at: float
    updated_at: float
    vector_blob: bytes = field(default=b"", repr=False)  # as stored (entry_vector_of reads it)

    def as_dict(self) -> dict[str, Any]:
        """The entry as plain data (without its stored vector)."""
        return {k: v for k, v in asdict(self).items() if k != "vector_blob"}


def _whole(cells: Sequence[Any]) -> Sequence[Any]:
    return cells


class CheckedReads:
    """Reads that skip (and log once, without content) a row that does not match its
    checksum or does not decode. MemoryStore provides query, the sealer and `checksummed`."""

    checksummed: bool
    query: Callable[..., list[tuple]]
    sealer: Any

    def checksum_column(self, alias: str) -> str:
        """A table's checksum column in a SELECT; NULL (unchecked) before schema 5."""
        return f"{alias}.checksum" if self.checksummed else "NULL"

    def checked(self, table: str, row_id: int, cells: Sequence[Any], checksum: bytes | None,
                read: Callable[..., T] = _whole, *args: Any) -> T | None:
        """read(*args) (default: the cells) of a row whose cells match its checksum and that
        decodes; None (logged) when damaged."""
        try:
            if not intact(cells, checksum):
                raise DamagedRowError(f"{table} row {row_id} does not match its checksum")
            return read(*args) if args else read(cells)
        except DamagedRowError:
            skipped = self.__dict__.setdefault("_skipped", set())
            if (table, row_id) not in skipped:
                skipped.add((table, row_id))
                log.warning("%s row %d is damaged and was left out; `epic-edge check` lists "
                            "the damaged rows", table, row_id)
            return None

    def _open_all(self, values: Sequence[Any]) -> list[str]:
        return [self.sealer.open(v) for v in values]

    def intact_rows(self, table: str, extra: str = "", tail: str = "") -> list[tuple]:
        """(id, *checked cells, *extra columns) of each row of `table` that matches its
        checksum; `tail` is the rest of the SELECT (WHERE, ORDER BY)."""
        n = len(CHECKED[table])
        rows = self.query(f"SELECT id, {columns(table)}, {self.checksum_column(table)}"
                          f"{', ' + extra if extra else ''} FROM {table} {tail}")
        return [(r[0], *r[1:1 + n], *r[2 + n:]) for r in rows
                if self.checked(table, r[0], r[1:1 + n], r[1 + n]) is not None]

    def checked_entries(self, tail: str, params: Iterable[Any] = ()) -> list[Entry]:
        """The entries `tail` (WHERE ... ORDER BY ... LIMIT) picks of the entry-item-preference
        join, each opened; an entry whose row, item or preference is damaged is left out."""
        ne, ni, np_ = (len(CHECKED[t]) for t in ("entries", "items", "preferences"))
        sums = [self.checksum_column(alias) for alias in "eip"]
        rows = self.query(
            f"SELECT e.id, e.created_at, e.updated_at, {columns('entries', 'e')}, {sums[0]}, "
            f"i.id, {columns('items', 'i')}, {sums[1]}, p.id, {columns('preferences', 'p')}, "
            f"{sums[2]} {_ENTRY_JOIN} {tail}", params)
        o = self.sealer.open
        out = []
        for entry_id, created, updated, *rest in rows:
            entry, entry_sum, rest = rest[:ne], rest[ne], rest[ne + 1:]
            item_id, item, item_sum, rest = rest[0], rest[1:1 + ni], rest[1 + ni], rest[2 + ni:]
            pref_id, pref, pref_sum = rest[0], rest[1:1 + np_], rest[1 + np_]
            instruction = self.checked("entries", entry_id, entry, entry_sum, o, entry[2])
            texts = self.checked("items", item_id, item, item_sum, self._open_all, item[:2])
            pref_text = self.checked("preferences", pref_id, pref, pref_sum, o, pref[0])
            if instruction is None or texts is None or pref_text is None:
                continue
            preference = Preference(int(pref_id), pref_text)
            out.append(Entry(int(entry_id), int(item_id), str(item[2]), texts[0], texts[1],
                                   preference, read_form(instruction, texts[0], preference),
                                   float(entry[4]), float(created), float(updated),
                                   bytes(entry[3])))
        return out
