"""One ingest batch: clean, de-duplicate, embed, filter, verify, embed instructions, commit."""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from epic_edge.items import expand
from epic_edge.stages import Candidate, coarse_filter, fine_verify
from epic_edge.store import NewEntry
from epic_edge.types import BatchStats, Item, Verdict

if TYPE_CHECKING:
    from epic_edge.memory import Memory

log = logging.getLogger(__name__)


class BatchIngester:
    """Runs the EPIC pipeline over one batch; writes it in a single transaction."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    @contextmanager
    def _timed(self, stats: BatchStats, stage: str):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        yield
        stats.add_time(stage, time.perf_counter() - start)

    def run(self, batch: list[Any]) -> BatchStats:
        mem = self.memory
        stats = BatchStats()
        with self._timed(stats, "prepare"):
            fresh, epoch = self._fresh_items(batch, stats)
        if not fresh:
            return stats
        keys = list(fresh)
        texts = [fresh[key].text for key in keys]
        with self._timed(stats, "embed"):
            vectors = mem.embedder.embed(texts)
        prefs, pref_vectors = mem.steering.preferences, mem.steering.vectors
        with self._timed(stats, "filter"):
            candidates = coarse_filter(vectors, prefs, pref_vectors, mem.tau)
        kept_items: dict[bytes, tuple[str, str, str]] = {}
        pending: list[tuple[bytes, int, str, float]] = []
        for key, text, cands in zip(keys, texts, candidates):
            cands = self._not_yet_linked(key, cands)
            if not cands:
                continue
            stats.passed_filter += 1
            with self._timed(stats, "verify"):
                verdict = self._verify(text, cands)
            stats.verified += 1
            stats.llm_calls += verdict.llm_calls
            if verdict.keep:
                stats.kept += 1
                item = fresh[key]
                kept_items[key] = (item.text, item.source, item.id)
                for pid in verdict.preference_ids:
                    pending.append((key, pid, verdict.instructions[pid], verdict.confidence))
        with self._timed(stats, "embed_instructions"):
            inst_vectors = (
                mem.embedder.embed([p[2] for p in pending])
                if pending
                else np.empty((0, mem.embedder.dim), np.float32)
            )
        entries = [NewEntry(k, pid, inst, vec, conf)
                   for (k, pid, inst, conf), vec in zip(pending, inst_vectors)]
        with self._timed(stats, "write"), mem._lock:
            with mem.store.transaction() as conn:
                ids = mem.store.write_batch(conn, kept_items, entries, keys, epoch)
            with self._timed(stats, "index"):
                mem._index_add(np.array(ids, dtype=np.int64), inst_vectors)
        stats.entries_added = len(ids)
        return stats

    def _fresh_items(self, batch: list[Any], stats: BatchStats) -> tuple[dict[bytes, Item], int]:
        """Clean and chunk the batch; keep items not yet judged under today's preferences."""
        items: dict[bytes, Item] = {}
        for item in expand(batch):
            stats.seen += 1
            if item is None:
                stats.rejected += 1
                continue
            key = self.memory.store.sealer.content_hash(item.text)
            if key in items:
                stats.duplicates += 1
                continue
            items[key] = item
        epoch = self.memory.store.epoch
        unseen = self.memory.store.unseen(list(items), epoch)
        stats.duplicates += len(items) - len(unseen)
        return {k: v for k, v in items.items() if k in unseen}, epoch

    def _not_yet_linked(self, key: bytes, cands: list[Candidate]) -> list[Candidate]:
        """For an item seen before new preferences arrived, only judge the new ones."""
        if not cands:
            return cands
        linked = self.memory.store.linked_preferences(key)
        return [c for c in cands if c.preference.id not in linked]

    def _verify(self, text: str, cands: list[Candidate]) -> Verdict:
        try:
            return fine_verify(self.memory.verifier, text, cands)
        except Exception as exc:  # a verifier bug must not lose the batch
            log.warning("verifier failed on an item (%s); treated as Discard",
                        type(exc).__name__)
            return Verdict.discard(f"verifier error: {type(exc).__name__}")
