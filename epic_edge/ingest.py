"""One ingest batch: clean, de-duplicate, embed, filter, verify, embed instructions, commit."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from epic_edge.faults import judge, worth_trying
from epic_edge.instructions import stored_form
from epic_edge.items import expand_items
from epic_edge.keep_score import rescore_of
from epic_edge.maintenance import KEEP_THRESHOLD
from epic_edge.preference_edits import Edited
from epic_edge.stages import (
    Candidate,
    coarse_drop_reason,
    coarse_filter,
    fine_verify,
    normalize_rows,
)
from epic_edge.store_writes import NewEntry
from epic_edge.types import BatchStats, Item, Outcome, Verdict

if TYPE_CHECKING:
    from epic_edge.protocols import Verifier
    from epic_edge.settings import MemorySettings

log = logging.getLogger(__name__)
FORGOTTEN = "forgotten earlier (`forget`): not stored again unless allow_forgotten is given"


class Judged(Edited, Protocol):
    """What ingest reads of a memory besides its preferences: tau, the verifier and the
    settings (consolidate_threshold); epic_edge.memory.Memory is one."""

    tau: float

    @property
    def verifier(self) -> Verifier: ...

    @property
    def settings(self) -> MemorySettings: ...


@dataclass
class Versions:
    """The ids a batch brings: each id's items (its chunks) in the batch's last version of
    it, and the id each of those items came under."""

    keys: dict[str, set[bytes]] = field(default_factory=dict)
    owner: dict[bytes, str] = field(default_factory=dict)
    input_of: dict[str, int] = field(default_factory=dict)  # the batch input it came from


class BatchIngester:
    """Runs the EPIC pipeline over one batch; writes it in a single transaction.

    An item `forget` deleted is skipped unless `allow_forgotten` (its tombstone then goes).
    Given a list as `outcomes`, each item's Outcome is appended to it (Memory.remember)."""

    def __init__(self, memory: Judged, allow_forgotten: bool = False,
                 outcomes: list[Outcome] | None = None) -> None:
        self.memory = memory
        self.allow_forgotten = allow_forgotten
        self.outcomes = outcomes
        self._noted: dict[bytes, Outcome] = {}  # this batch's outcomes by content hash

    def _note(self, key: bytes, stage: str, reason: str, item_id: str = "",
              preference_ids: list[int] | None = None, p_keep: float | None = None) -> None:
        """Record where an item was settled, when the caller asked for outcomes."""
        if self.outcomes is None:
            return
        outcome = self._noted.get(key)
        alone = stage in ("empty", "duplicate")  # not the outcome of the key's first item
        if outcome is None or alone:
            outcome = Outcome(key, item_id, stage, reason)
            self.outcomes.append(outcome)
            if not alone:
                self._noted[key] = outcome
        outcome.stage, outcome.reason = stage, reason
        outcome.preference_ids, outcome.p_keep = list(preference_ids or []), p_keep

    @contextmanager
    def _timed(self, stats: BatchStats, stage: str):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        yield
        stats.add_time(stage, time.perf_counter() - start)

    def run(self, batch: list[Any]) -> BatchStats:
        mem = self.memory
        stats = BatchStats()
        self._noted = {}
        with self._timed(stats, "prepare"):
            fresh, epoch, versions, unforget = self._fresh_items(batch, stats)
            changed = self._changed_items(versions)
        if not fresh and not changed:
            return stats
        keys = list(fresh)
        texts = [fresh[key].text for key in keys]
        with self._timed(stats, "embed"):
            vectors = mem.embedder.embed(texts) if texts else np.empty((0, mem.embedder.dim))
        prefs, pref_vectors = mem.steering.preferences, mem.steering.vectors
        with self._timed(stats, "filter"):
            candidates = coarse_filter(vectors, prefs, pref_vectors, mem.tau)
        kept_items: dict[bytes, tuple[str, str, str]] = {}
        pending: list[tuple[bytes, int, str, float]] = []
        sure: float | None = None  # the verdicts' threshold (maintenance.KEEP_THRESHOLD)
        judged: list[bytes] = []
        unjudged_ids: set[str] = set()  # ids of items with a part not judged
        for key, text, vector, cands in zip(keys, texts, vectors, candidates):
            if not cands:
                if self.outcomes is not None:
                    self._note(key, "coarse filter",
                               coarse_drop_reason(vector, prefs, pref_vectors, mem.tau))
                continue
            cands = self._not_yet_linked(key, cands)
            if not cands:
                self._note(key, "already filed", "already filed under every preference it "
                                                 "passes the coarse filter for")
                continue
            stats.passed_filter += 1
            verdict = None
            if worth_trying(stats.failed, stats.verified):
                with self._timed(stats, "verify"):
                    verdict = self._verify(text, cands, self._rescore(vector, cands, text))
            if verdict is None:  # not judged: not in the ledger, so the next ingest retries it
                stats.failed += 1
                self._note(key, "verifier failed", "the verifier failed on it (see the "
                           "warnings): not recorded as judged, the next ingest judges it again")
                unjudged_ids.add(versions.owner.get(key, ""))
                continue
            judged.append(key)
            stats.verified += 1
            stats.llm_calls += verdict.llm_calls
            self._note(key, "kept" if verdict.keep else "verifier", verdict.reason,
                       preference_ids=verdict.preference_ids, p_keep=verdict.p_keep)
            if verdict.keep:
                stats.kept += 1
                sure = verdict.threshold if verdict.threshold is not None else sure
                item = fresh[key]
                kept_items[key] = (item.text, item.source, item.id)
                for pid in verdict.preference_ids:
                    pending.append((key, pid, verdict.instructions[pid], verdict.confidence))
        if stats.failed:
            log.warning("the verifier failed on %d of %d items; they are not recorded as judged "
                        "and the next ingest of them verifies them again", stats.failed,
                        stats.passed_filter)
        # an old version is replaced only once its new version has been judged
        replaced = [row for row, item_id in changed.items() if item_id not in unjudged_ids]
        with self._timed(stats, "embed_instructions"):
            entry_vectors = self._entry_vectors(pending, dict(zip(keys, vectors)))
        by_id = {p.id: p for p in prefs}
        entries = [NewEntry(k, pid, stored_form(inst, fresh[k].text, by_id[pid]), vec, conf)
                   for (k, pid, inst, conf), vec in zip(pending, entry_vectors)]
        stored_ids = {k: mem.store.sealer.id_hash(item.id) for k, item in fresh.items()}
        with self._timed(stats, "consolidate"):
            entries, refresh = self._consolidate(entries, mem.store.entries_of_items(replaced),
                                                 stored_ids)
            stats.consolidated = len(pending) - len(entries)
        with self._timed(stats, "write"), mem.entry_index.lock:
            with mem.store.transaction() as conn:
                # a preference removed meanwhile (another thread or process) takes its new
                # entries with it, as it took the stored ones
                live = mem.store.preference_ids(conn)
                entries = [e for e in entries if e.preference_id in live]
                linked = {e.item_key for e in entries}
                kept_items = {k: v for k, v in kept_items.items() if k in linked}
                dropped = mem.store.delete_items(conn, replaced)
                ids = mem.store.write_batch(conn, kept_items, entries, judged, epoch, refresh,
                                            unforget)
                if sure is not None and entries:  # what was kept below it is evicted first
                    mem.store.set_meta(conn, KEEP_THRESHOLD, sure)
            with self._timed(stats, "index"):
                mem.entry_index.remove(dropped)
                mem.entry_index.add(np.array(ids, dtype=np.int64),
                                    np.array([e.embedding for e in entries], np.float32))
        stats.entries_added = len(ids)
        stats.replaced = len(replaced)
        return stats

    def _entry_vectors(self, pending: list[tuple[bytes, int, str, float]],
                       item_vectors: dict[bytes, np.ndarray]) -> np.ndarray:
        """What each new entry is indexed by: its item's vector (already embedded), its
        instruction's, or normalise(item + instruction), as the file was created with."""
        mem = self.memory
        if not pending:
            return np.empty((0, mem.embedder.dim), np.float32)
        kind = mem.store.entry_vector
        items = np.stack([item_vectors[p[0]] for p in pending]).astype(np.float32)
        if kind == "item":
            return items
        instructions = np.asarray(mem.embedder.embed([p[2] for p in pending]), np.float32)
        return instructions if kind == "instruction" else normalize_rows(items + instructions)

    def _changed_items(self, versions: Versions) -> dict[int, str]:
        """Stored items (and chunks) of an id this batch brings again that its new version
        does not hold (row -> the id): replaced, not kept beside it."""
        found = self.memory.store.rows_of_items(versions.keys)
        return {row: item_id for item_id, rows in found.items()
                for row, key in rows if key not in versions.keys[item_id]}

    def _consolidate(self, entries: list[NewEntry], superseded: set[int],
                     stored_ids: dict[bytes, str]) -> tuple[list[NewEntry], dict[int, float]]:
        """Merge near-duplicate instructions of one preference (cosine >= threshold): the
        stored entry is refreshed (newer timestamp, higher confidence) instead of adding one.
        Only entries of items under the same id (none, mostly) merge: two ids are two items.
        Entries in `superseded` (of items this batch replaces) are never merged into."""
        threshold = self.memory.settings.consolidate_threshold
        if threshold is None or not entries:
            return entries, {}
        mem = self.memory
        keep: list[NewEntry] = []
        refresh: dict[int, float] = {}
        vectors = np.array([e.embedding for e in entries], np.float32)
        scores, ids = mem.entry_index.search(vectors, 4)
        owners = mem.store.entry_owners(int(i) for i in ids.ravel() if i >= 0)
        for n, entry in enumerate(entries):
            owner = (entry.preference_id, stored_ids[entry.item_key])
            match = next((int(i) for s, i in zip(scores[n], ids[n])
                          if i >= 0 and s >= threshold and owners.get(int(i)) == owner
                          and int(i) not in superseded), None)
            if match is not None:
                refresh[match] = max(refresh.get(match, 0.0), entry.confidence)
            elif not any((k.preference_id, stored_ids[k.item_key]) == owner
                         and float(k.embedding @ entry.embedding) >= threshold for k in keep):
                keep.append(entry)
        return keep, refresh

    def _fresh_items(self, batch: list[Any], stats: BatchStats
                     ) -> tuple[dict[bytes, Item], int, Versions, set[bytes]]:
        """Clean and chunk the batch; keep items not forgotten (unless allowed: their keys
        come fourth) and not yet judged under today's preferences. An id that comes twice in
        the batch keeps its last version (the earlier ones count as duplicates)."""
        items: dict[bytes, Item] = {}
        versions = Versions()
        store = self.memory.store
        for number, item_id, item in expand_items(batch):
            stats.seen += 1
            if item_id and versions.input_of.get(item_id, number) != number:
                for old in versions.keys.pop(item_id):  # an earlier version in this batch
                    if items.pop(old, None) is not None:
                        stats.duplicates += 1
            if item_id:
                versions.input_of[item_id] = number
                versions.keys.setdefault(item_id, set())
            if item is None:
                stats.rejected += 1
                self._note(b"", "empty", "the item is empty once cleaned")
                continue
            key = store.sealer.content_hash(item.text, item.id)
            if item_id:
                versions.keys[item_id].add(key)
                versions.owner[key] = item_id
            if key in items:
                stats.duplicates += 1
                self._note(key, "duplicate", "the same text came earlier in this batch", item.id)
                continue
            items[key] = item
            self._note(key, "new", "", item.id)
        forgotten = store.forgotten(items)
        if not self.allow_forgotten:
            for key in forgotten:
                stats.forgotten += 1
                self._note(key, "forgotten", FORGOTTEN)
                del items[key]
        epoch = store.epoch
        unseen = store.unseen(list(items), epoch)
        stats.duplicates += len(items) - len(unseen)
        for key in set(items) - unseen:
            self._note(key, "already judged", "already judged under the current preferences")
        fresh = {k: v for k, v in items.items() if k in unseen}
        return fresh, epoch, versions, forgotten & set(fresh) if self.allow_forgotten else set()

    def _not_yet_linked(self, key: bytes, cands: list[Candidate]) -> list[Candidate]:
        """For an item seen before new preferences arrived, only judge the new ones."""
        if not cands:
            return cands
        linked = self.memory.store.linked_preferences(key)
        return [c for c in cands if c.preference.id not in linked]

    def _verify(self, text: str, cands: list[Candidate],
                rescore: Callable[[np.ndarray], np.ndarray] | None) -> Verdict | None:
        """The verdict, or None when the verifier failed on this item (epic_edge.faults).

        A verifier that cannot be built raises here, before anything of the batch is written."""
        verifier = self.memory.verifier
        return judge(lambda: fine_verify(verifier, text, cands, rescore))

    def _rescore(self, vector: np.ndarray, cands: list[Candidate], text: str
                 ) -> Callable[[np.ndarray], np.ndarray] | None:
        """The keep score of this item's candidates, when the verifier has one."""
        steering = self.memory.steering
        return rescore_of(self.memory.verifier, steering.preferences, steering.vectors, vector,
                          cands, text)
