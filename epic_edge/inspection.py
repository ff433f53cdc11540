"""Looking inside a memory and editing it: list entries, forget an item, explain a decision."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from epic_edge import schema
from epic_edge.errors import InvalidInputError
from epic_edge.ingest import Judged
from epic_edge.items import checked_id
from epic_edge.keep_score import rescore_of
from epic_edge.maintenance import Budget
from epic_edge.preference_edits import find_preference
from epic_edge.stages import coarse_drop_reason, coarse_filter, fine_verify
from epic_edge.store_reads import Entry  # noqa: F401 - Entry is part of this API

if TYPE_CHECKING:
    from epic_edge.profiles import Profile

MAX_PAGE = 1_000  # entries per page of entries()
SQLITE_MAX_INT = 2**63 - 1  # the largest integer SQLite stores (a row number, an offset)


class Inspected(Judged, Protocol):
    """What looking inside a memory reads: ingest's parts (explain runs its stages), the
    profile and the footprint; epic_edge.memory.Memory is one."""

    profile: Profile | None

    def footprint(self) -> dict[str, int]: ...


def list_entries(
    memory: Inspected, offset: int = 0, limit: int = 50, preference: int | str | None = None
) -> list[Entry]:
    """A page of entries, oldest first; only one preference's when `preference` is given."""
    if not 0 <= offset <= SQLITE_MAX_INT:
        raise InvalidInputError(f"offset must be between 0 and {SQLITE_MAX_INT}")
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidInputError(f"limit must be between 1 and {MAX_PAGE}, got {limit}")
    where, params = "", []
    if preference is not None:
        where, params = "WHERE e.preference_id = ?", [find_preference(memory, preference).id]
    return memory.store.checked_entries(f"{where} ORDER BY e.id LIMIT ? OFFSET ?",
                                        [*params, limit, offset])


def item_rows(memory: Inspected, item: int | str) -> list[tuple[int, bytes]]:
    """(row id, content hash) of the item `item` names: an int is the item's number in this
    memory; a str is the id it was ingested with (its chunks "<id>#<n>" included)."""
    if isinstance(item, bool) or not isinstance(item, (int, str)):
        raise InvalidInputError(f"an item id is an int or a str, got {type(item).__name__}")
    store = memory.store
    if isinstance(item, int):  # beyond SQLite's integers no item has that number
        rows = (store.query("SELECT id, content_hash FROM items WHERE id=?", (item,))
                if -SQLITE_MAX_INT <= item <= SQLITE_MAX_INT else [])
    elif not checked_id(item, "forget").strip():
        raise InvalidInputError("the item id is empty")
    else:
        rows = store.rows_of_items([item])[item]
        if not rows and store.sealer.enabled:  # the keyed id a result showed
            rows = store.query("SELECT id, content_hash FROM items WHERE external_id = ?",
                               (item,))
    return [(int(r[0]), bytes(r[1])) for r in rows]


def forget_item(memory: Inspected, item: int | str) -> int:
    """Delete an item and its entries (no copy of its text stays in the file); returns the
    entries removed. A tombstone (its content hash, keyed like the items' with a key) stays,
    so ingesting the same item again stores nothing unless `allow_forgotten` is given; it
    also leaves the judged-items ledger, so an allowed ingest judges it again."""
    memory.sync()
    rows = item_rows(memory, item)
    if not rows:
        raise InvalidInputError(f"no item {item!r} in this memory (an item is named by the "
                                "item_id or external_id a hit or an entry shows)")
    with memory.entry_index.lock:
        with memory.store.transaction() as conn:
            entry_ids = memory.store.delete_items(conn, [row for row, _ in rows])
            conn.executemany("DELETE FROM judged WHERE key = ?",
                             [(schema.ledger_key(key),) for _, key in rows])
            memory.store.add_tombstones(conn, [key for _, key in rows])
        memory.entry_index.remove(entry_ids)
        memory.store.vacuum()
    return len(entry_ids)


@dataclass
class Explanation:
    """Why an item would (not) be kept now: every stage of the pipeline on this text."""

    text: str
    tau: float
    similarities: list[dict[str, Any]]  # per preference: id, text, similarity, passes
    candidates: list[int]
    verdict: dict[str, Any] | None  # the verifier's, when some preference passed
    p_keep: float | None
    threshold: float | None
    would_keep: list[int]
    stored_under: list[int]  # preferences the same text is stored under now
    why: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def explain(memory: Inspected, text: str) -> Explanation:
    """Run the coarse filter and the verifier on `text` without storing anything (the
    whole text is judged as one item; ingest splits one of over 300 words into chunks)."""
    from epic_edge.items import to_item

    item = to_item(text)
    clean = " ".join(item.text.split())
    if not clean:
        raise InvalidInputError("text is empty")
    memory.sync()
    prefs, vectors = memory.steering.preferences, memory.steering.vectors
    if not prefs:
        raise InvalidInputError("this memory has no preferences to judge against")
    vector = memory.embedder.embed([clean])
    sims = (np.asarray(vector, np.float32) @ vectors.T)[0] if len(vectors) else np.empty(0)
    candidates = coarse_filter(vector, prefs, vectors, memory.tau)[0]
    table = [{"id": p.id, "text": p.text, "similarity": round(float(s), 4),
              "passes": bool(s >= memory.tau)} for p, s in zip(prefs, sims)]
    table.sort(key=lambda row: -row["similarity"])
    stored = sorted(memory.store.preferences_holding(clean))
    if not candidates:
        return Explanation(clean, memory.tau, table, [], None, None, None, [], stored,
                           coarse_drop_reason(vector[0], prefs, vectors, memory.tau))
    verdict = fine_verify(memory.verifier, clean, candidates, rescore_of(
        memory.verifier, prefs, vectors, vector[0], candidates, clean))
    threshold = verdict.threshold  # None for a verifier that does not score
    p_keep = verdict.p_keep
    names = ", ".join(f"{c.preference.id}" for c in candidates)
    if verdict.keep:
        why = (f"kept for preference(s) {verdict.preference_ids} ({verdict.reason}); "
               f"candidates after the coarse filter: {names}")
    else:
        why = (f"passed the coarse filter for preference(s) {names}, then discarded by the "
               f"verifier: {verdict.reason}")
    return Explanation(clean, memory.tau, table, [c.preference.id for c in candidates],
                       asdict(verdict), None if p_keep is None else round(float(p_keep), 4),
                       None if threshold is None else float(threshold),
                       list(verdict.preference_ids) if verdict.keep else [], stored, why)


def memory_info(memory: Inspected) -> dict[str, Any]:
    """What `epic-edge info` prints: path, profile, embedder, counts, budget, footprint."""
    store = memory.store
    return {
        "path": str(store.path),
        "profile": memory.profile.name if memory.profile else None,
        "embedder": memory.embedder.fingerprint,
        "tau": memory.tau,
        "k": memory.settings.k,
        "preferences": len(memory.steering),
        "items": store.count("items"),
        "entries": store.count("entries"),
        "items_judged": store.count("judged"),
        "items_forgotten": store.count("forgotten"),
        "budget": asdict(Budget.load(store)),
        "evicted_total": int(store.get_meta("evicted_total") or 0),
        "footprint": memory.footprint(),
        "created_at": time.strftime(
            "%Y-%m-%d %H:%M:%S", time.localtime(float(store.get_meta("created_at") or 0))
        ),
    }


class Inspecting:
    """Memory's looking-inside API (mixed into epic_edge.memory.Memory)."""

    def entries(
        self: Inspected, offset: int = 0, limit: int = 50, preference: int | str | None = None
    ) -> list[Entry]:
        """A page of stored entries (item, preference, instruction, confidence), oldest first."""
        return list_entries(self, offset, limit, preference)

    def forget(self: Inspected, item: int | str) -> int:
        """Delete one item (its number in `entries()`, or the id it was ingested with) and
        its entries; returns entries removed."""
        return forget_item(self, item)

    def explain(self: Inspected, text: str) -> Explanation:
        """Why `text` would (not) be kept now: similarity per preference, tau, the verifier's
        verdict with P(Keep) and threshold. Stores nothing."""
        return explain(self, text)

    def footprint(self: Inspected) -> dict[str, int]:
        """Bytes on disk by part (items, instructions, vectors, preferences, ...)."""
        return self.store.footprint()

    def info(self: Inspected) -> dict[str, Any]:
        """Path, profile, embedder, tau, k, counts, budget and footprint, for `epic-edge info`."""
        return memory_info(self)
