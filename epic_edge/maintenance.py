"""Keeping a memory healthy: integrity checks and budget eviction by confidence and age."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from epic_edge.errors import DamagedRowError
from epic_edge.row_checks import CHECKED, columns, intact
from epic_edge.store import MemoryStore
from epic_edge.vectors import decode

if TYPE_CHECKING:
    from epic_edge.entry_index import EntryIndex

DEFAULT_HALF_LIFE_DAYS = 30.0
# meta key: the verifier threshold of the last ingest; an entry kept below it (a verifier
# floor fills a memory while it has room) is evicted before any other
KEEP_THRESHOLD = "keep_threshold"


@dataclass
class Budget:
    """Limits on a memory; None means unlimited. Stored in the file's meta table."""

    max_entries: int | None = None
    max_bytes: int | None = None
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS

    @classmethod
    def load(cls, store: MemoryStore) -> Budget:
        def num(key: str) -> int | None:
            value = store.get_meta(key)
            return int(value) if value not in (None, "", "None") else None

        half_life = store.get_meta("budget_half_life_days")
        return cls(num("budget_entries"), num("budget_bytes"),
                   float(half_life) if half_life else DEFAULT_HALF_LIFE_DAYS)

    def save(self, store: MemoryStore) -> None:
        with store.transaction() as conn:
            store.set_meta(conn, "budget_entries", self.max_entries)
            store.set_meta(conn, "budget_bytes", self.max_bytes)
            store.set_meta(conn, "budget_half_life_days", self.half_life_days)


def retention_order(
    store: MemoryStore, half_life_days: float, now: float | None = None
) -> list[int]:
    """Entry ids, first to evict first.

    Entries kept below the verifier's threshold (while the memory had room) go first, then
    the rest. Within each tier: retention = confidence x 0.5 ** (age_days / half_life_days),
    where confidence is the verifier's P(Keep) stored with the entry and age counts from its
    last update. Each preference keeps a fair share: an entry's rank is its place among its
    own preference's entries of the tier by retention, and the deepest rank goes first (so the
    preference holding the most entries gives them up, and one a question rarely touches keeps
    its best), then the lowest retention; ties go to the older entry, then the lower id.
    """
    now = time.time() if now is None else now
    rows = store.query("SELECT id, preference_id, confidence, updated_at FROM entries")
    sure = float(store.get_meta(KEEP_THRESHOLD) or "-inf")
    tiers: tuple[dict[int, list[tuple[float, float, int]]], ...] = ({}, {})  # provisional, sure
    for entry_id, preference_id, confidence, updated in rows:
        age_days = max(now - float(updated), 0.0) / 86400.0
        retention = float(confidence) * math.pow(0.5, age_days / max(half_life_days, 1e-9))
        tier = tiers[float(confidence) >= sure]
        tier.setdefault(int(preference_id), []).append((retention, float(updated), int(entry_id)))
    return [entry_id for by_preference in tiers for entry_id in _fair_share(by_preference)]


def _fair_share(by_preference: dict[int, list[tuple[float, float, int]]]) -> list[int]:
    """Entry ids of one tier, first to evict first: the deepest rank within its preference
    (by retention, then newer), then the lowest retention, the older, the lower id."""
    ranked = [(-rank, *entry) for entries in by_preference.values()
              for rank, entry in enumerate(sorted(entries, reverse=True))]
    return [entry_id for *_, entry_id in sorted(ranked)]


def delete_entries(store: MemoryStore, entry_ids: list[int]) -> None:
    """Delete entries and any item left without one, in one transaction."""
    if not entry_ids:
        return
    with store.transaction() as conn:
        conn.executemany("DELETE FROM entries WHERE id=?", [(i,) for i in entry_ids])
        conn.execute("DELETE FROM items WHERE id NOT IN (SELECT DISTINCT item_id FROM entries)")
        evicted = int(store.get_meta("evicted_total") or 0) + len(entry_ids)
        store.set_meta(conn, "evicted_total", evicted)


def enforce_budget(store: MemoryStore, budget: Budget) -> list[int]:
    """Evict until the memory fits its budget; returns the evicted entry ids."""
    evicted: list[int] = []
    if budget.max_entries is not None:
        excess = store.count("entries") - budget.max_entries
        if excess > 0:
            victims = retention_order(store, budget.half_life_days)[:excess]
            delete_entries(store, victims)
            evicted += victims
    if budget.max_bytes is not None:
        # evict about what the overshoot is worth, measured in the pages the content uses
        # once a VACUUM has packed the rows left (rows deleted from pages that still hold
        # others free no page until then): each round takes at least one entry, so it ends
        while True:
            # a batch that fits is measured without a vacuum, whose checkpoint would wait on
            # any reader in another process
            total = store.content_bytes()
            if total > budget.max_bytes:
                store.vacuum(repack=True)
                total = store.content_bytes()
            entries = store.count("entries")
            if total <= budget.max_bytes or entries == 0:
                break
            need = math.ceil((total - budget.max_bytes) / (total / entries))
            victims = retention_order(store, budget.half_life_days)[:max(1, need)]
            delete_entries(store, victims)
            evicted += victims
    if evicted:
        store.vacuum()  # no evicted text stays in free pages or the WAL
    return evicted


def evict_to_budget(store: MemoryStore, entries: EntryIndex, budget: Budget,
                    save: bool = False) -> list[int]:
    """Enforce `budget` (saved in the file first when `save`) and drop the evicted entries
    from the index, under its lock; returns the evicted entry ids."""
    with entries.lock:
        if save:
            budget.save(store)
        if budget.max_entries is None and budget.max_bytes is None:
            return []
        evicted = enforce_budget(store, budget)
        entries.remove(evicted)
    return evicted


def damaged_rows(store: MemoryStore, dim: int) -> list[str]:
    """A problem for each row of preferences, items and entries whose cells do not match its
    checksum, whose text does not open or whose vector does not decode to a unit vector."""
    problems = []
    texts = {"preferences": (0,), "items": (0, 1), "entries": (2,)}
    vectors = {"preferences": (1, "float32"), "entries": (3, store.vector_format)}
    for table in CHECKED:
        for row_id, *values, checksum in store.query(
                f"SELECT id, {columns(table)}, {store.checksum_column(table)} FROM {table}"):
            try:
                if not intact(values, checksum):
                    raise DamagedRowError("its cells do not match its checksum")
                for n in texts[table]:
                    store.sealer.open(values[n])
                if table in vectors:
                    n, fmt = vectors[table]
                    vector = decode(store.open_vector(values[n]), dim, fmt)
                    if abs(float(np.linalg.norm(vector)) - 1) > 1e-3:
                        raise DamagedRowError("embedding is not a unit vector")
            except DamagedRowError as exc:
                problems.append(f"{table} row {row_id} is damaged: {exc}")
    return problems


@dataclass
class CheckReport:
    """What `epic-edge check` found; ok when `problems` is empty."""

    problems: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems


def check(store: MemoryStore, indexed: int | None = None) -> CheckReport:
    """SQLite integrity, foreign keys, meta, embeddings that decode with the right dim, and
    (given `indexed`, the vectors in the index) that the index holds one per entry."""
    report = CheckReport()
    integrity = [r[0] for r in store.query("PRAGMA integrity_check")]
    if integrity != ["ok"]:
        report.problems += [f"sqlite integrity: {line}" for line in integrity]
    for table, rowid, parent, _ in store.query("PRAGMA foreign_key_check"):
        report.problems.append(f"{table} row {rowid} points to a missing {parent} row")
    dim_text = store.get_meta("dim")
    if dim_text is None or store.get_meta("embedder") is None:
        report.problems.append("meta lacks the embedder fingerprint or dim")
        return report
    report.problems += damaged_rows(store, int(dim_text))
    orphans = store.query("SELECT COUNT(*) FROM items WHERE id NOT IN "
                          "(SELECT DISTINCT item_id FROM entries)")[0][0]
    if orphans:
        report.problems.append(f"{orphans} items have no entry (should have been removed)")
    report.counts = {t: store.count(t) for t in ("preferences", "items", "entries", "judged")}
    if indexed is not None and indexed != report.counts["entries"]:
        report.problems.append(f"index holds {indexed} vectors for {report.counts['entries']} "
                               "entries")
    return report
