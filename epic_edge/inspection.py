"""Looking inside a memory and editing it: list entries, forget an item, explain a decision."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from epic_edge import schema
from epic_edge.errors import InvalidInputError
from epic_edge.instructions import read_form
from epic_edge.maintenance import Budget
from epic_edge.preference_edits import find_preference
from epic_edge.stages import coarse_drop_reason, coarse_filter, fine_verify
from epic_edge.types import Preference

if TYPE_CHECKING:
    from epic_edge.memory import Memory

MAX_PAGE = 1_000  # entries per page of entries()


@dataclass(frozen=True)
class Entry:
    """One stored entry: an item kept for a preference, with its usage instruction.

    `item_id` is the item's number in this memory (what `forget` takes); `external_id` is
    the id the item was ingested with ("" when none).
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

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def list_entries(
    memory: Memory, offset: int = 0, limit: int = 50, preference: int | str | None = None
) -> list[Entry]:
    """A page of entries, oldest first; only one preference's when `preference` is given."""
    if offset < 0:
        raise InvalidInputError("offset must be >= 0")
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidInputError(f"limit must be between 1 and {MAX_PAGE}, got {limit}")
    where, params = "", []
    if preference is not None:
        where, params = "WHERE e.preference_id = ?", [find_preference(memory, preference).id]
    rows = memory.store.query(
        "SELECT e.id, i.id, i.external_id, i.text, i.source, p.id, p.text, e.instruction, "
        "e.confidence, e.created_at, e.updated_at FROM entries e "
        "JOIN items i ON i.id = e.item_id JOIN preferences p ON p.id = e.preference_id "
        f"{where} ORDER BY e.id LIMIT ? OFFSET ?", [*params, limit, offset])
    o = memory.store.sealer.open
    entries = []
    for r in rows:
        item, pref = o(r[3]), Preference(int(r[5]), o(r[6]))
        entries.append(Entry(int(r[0]), int(r[1]), r[2], item, o(r[4]), pref,
                             read_form(o(r[7]), item, pref), float(r[8]), float(r[9]),
                             float(r[10])))
    return entries


def item_rows(memory: Memory, item: int | str) -> list[tuple[int, bytes]]:
    """(row id, content hash) of the item `item` names: an int is the item's number in this
    memory; a str is the id it was ingested with (its chunks "<id>#<n>" included)."""
    if isinstance(item, bool) or not isinstance(item, (int, str)):
        raise InvalidInputError(f"an item id is an int or a str, got {type(item).__name__}")
    store = memory.store
    if isinstance(item, int):
        rows = store.query("SELECT id, content_hash FROM items WHERE id=?", (item,))
    elif not item.strip():
        raise InvalidInputError("the item id is empty")
    elif not store.sealer.enabled:
        rows = store.query("SELECT id, content_hash FROM items WHERE external_id = ? "
                           "OR substr(external_id, 1, ?) = ?", (item, len(item) + 1, f"{item}#"))
    else:  # ids are keyed hashes: look up the id (or the hash a result showed), then its
        # chunks "<id>#0", "#1", ... in turn
        rows, start = store.query("SELECT id, content_hash FROM items WHERE external_id IN "
                                  "(?, ?)", (store.sealer.id_hash(item), item)), 0
        while True:
            names = [store.sealer.id_hash(f"{item}#{n}") for n in range(start, start + 256)]
            found = store.query("SELECT id, content_hash FROM items WHERE external_id IN "
                                f"({','.join('?' * len(names))})", names)
            if not found:
                break
            rows, start = rows + found, start + 256
    return [(int(r[0]), bytes(r[1])) for r in rows]


def forget_item(memory: Memory, item: int | str) -> int:
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


def explain(memory: Memory, text: str) -> Explanation:
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
    key = memory.store.sealer.content_hash(clean)
    stored = sorted(memory.store.linked_preferences(key))
    if not candidates:
        return Explanation(clean, memory.tau, table, [], None, None, None, [], stored,
                           coarse_drop_reason(vector[0], prefs, vectors, memory.tau))
    verdict = fine_verify(memory.verifier, clean, candidates)
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


def memory_info(memory: Memory) -> dict[str, Any]:
    """What `epic-edge info` prints: path, profile, embedder, counts, budget, footprint."""
    store = memory.store
    return {
        "path": str(store.path),
        "profile": memory.profile.name if memory.profile else None,
        "embedder": memory.embedder.fingerprint,
        "tau": memory.tau,
        "k": memory.k,
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
        self: Memory, offset: int = 0, limit: int = 50, preference: int | str | None = None
    ) -> list[Entry]:
        """A page of stored entries (item, preference, instruction, confidence), oldest first."""
        return list_entries(self, offset, limit, preference)

    def forget(self: Memory, item: int | str) -> int:
        """Delete one item (its number in `entries()`, or the id it was ingested with) and
        its entries; returns entries removed."""
        return forget_item(self, item)

    def explain(self: Memory, text: str) -> Explanation:
        """Why `text` would (not) be kept now: similarity per preference, tau, the verifier's
        verdict with P(Keep) and threshold. Stores nothing."""
        return explain(self, text)

    def footprint(self: Memory) -> dict[str, int]:
        """Bytes on disk by part (items, instructions, vectors, preferences, ...)."""
        return self.store.footprint()

    def info(self: Memory) -> dict[str, Any]:
        """Path, profile, embedder, tau, k, counts, budget and footprint, for `epic-edge info`."""
        return memory_info(self)
