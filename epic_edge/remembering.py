"""One item offered to a memory, and what became of it: kept (under which preference) or
dropped (at which stage, and why)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from epic_edge.errors import InvalidInputError
from epic_edge.ingest import BatchIngester, Judged
from epic_edge.items import to_item
from epic_edge.types import BatchStats, Outcome, Preference


class Remembering(Judged, Protocol):
    """What remember reads of a memory: ingest's parts and its batch runner (epic_edge.memory.
    Memory is one)."""

    def run_ingester(self, ingester: BatchIngester, items: Iterable[Any],
                     batch_size: int = 32) -> Iterator[BatchStats]: ...


@dataclass(frozen=True)
class Filed:
    """What became of one stored unit of an item (an item of over 300 words is split into
    chunks, each judged on its own).

    `kept`: it is in the memory now, as item `item_id` with `entry_ids`, filed under
    `preferences`; else `stage` says where it was dropped and `reason` why. `external_id` is
    the id it was offered with ("<id>#<n>" for a chunk); `p_keep` the decision's P(Keep)
    where a verifier scored it.
    """

    kept: bool
    item_id: int | None
    external_id: str
    preferences: list[Preference]
    entry_ids: list[int]
    stage: str
    reason: str
    p_keep: float | None


@dataclass(frozen=True)
class Remembered:
    """The answer of Memory.remember: kept when any part of the item is in the memory."""

    kept: bool
    items: list[Filed]
    stats: BatchStats

    def as_dict(self) -> dict[str, Any]:
        counters = {k: v for k, v in asdict(self.stats).items() if k != "seconds"}
        return {"kept": self.kept, "items": [asdict(f) for f in self.items], "stats": counters}


def remember(memory: Remembering, item: Any, allow_forgotten: bool = False) -> Remembered:
    """Ingest one item (str, bytes, Item or {"text", "source", "id"}) in one batch and say
    what became of it. An empty text is refused, as an empty preference or question is."""
    if not " ".join(to_item(item).text.split()):
        raise InvalidInputError("text is empty")
    outcomes: list[Outcome] = []
    total = BatchStats()
    for stats in memory.run_ingester(BatchIngester(memory, allow_forgotten, outcomes), [item]):
        total.merge(stats)
    filed = [resolve(memory, outcome, total.evicted > 0) for outcome in outcomes]
    return Remembered(any(f.kept for f in filed), filed, total)


def resolve(memory: Remembering, outcome: Outcome, evicted: bool) -> Filed:
    """The item of `outcome` as the memory holds it now (after its batch and its budget)."""
    store = memory.store
    rows = store.query(
        "SELECT i.id, e.id, p.id, p.text FROM items i JOIN entries e ON e.item_id = i.id "
        "JOIN preferences p ON p.id = e.preference_id WHERE i.content_hash = ? ORDER BY e.id",
        (outcome.key,)) if outcome.key else []
    if rows:
        reason = (outcome.reason if outcome.stage == "kept"
                  else f"already in the memory ({outcome.reason})")
        return Filed(True, int(rows[0][0]), outcome.external_id,
                     [Preference(int(r[2]), store.sealer.open(r[3])) for r in rows],
                     [int(r[1]) for r in rows], outcome.stage, reason, outcome.p_keep)
    reason = outcome.reason
    if outcome.stage == "kept":
        reason += ("; then evicted: the memory is over its budget and this entry was the "
                   "least confident" if evicted else
                   "; not stored: a near-duplicate entry of the same preference was refreshed "
                   "instead (or the preference was removed meanwhile)")
    return Filed(False, None, outcome.external_id, [], [], outcome.stage, reason,
                 outcome.p_keep)
