"""Memory: the object an app embeds; one memory file, one embedder, a verifier, an index."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge import inspection, registry, transfer
from epic_edge.background import BackgroundGate
from epic_edge.context import format_context, regime_rules
from epic_edge.errors import InvalidInputError, MemoryFileError
from epic_edge.ingest import BatchIngester
from epic_edge.items import without_surrogates
from epic_edge.maintenance import (
    DEFAULT_HALF_LIFE_DAYS,
    Budget,
    CheckReport,
    check,
    enforce_budget,
)
from epic_edge.models import model_dir as default_model_dir
from epic_edge.profiles import Profile, load_profile
from epic_edge.protocols import Embedder, VectorIndex, Verifier
from epic_edge.retrieval import Retrieval, lookup
from epic_edge.stages import Steering
from epic_edge.store import MemoryStore
from epic_edge.types import BatchStats, Hit, Item, Preference
from epic_edge.vectors import LEGACY_ENTRY_VECTOR, decode, encode

log = logging.getLogger(__name__)

MAX_PREFERENCE_CHARS = 2_000
MAX_QUESTION_CHARS = 8_000
MAX_PREFERENCES = 1_000  # steering is O(preferences) per query; beyond this, split memories
MAX_K = 1_000  # hits per lookup; the index allocates k slots per query


def _clean_text(text: Any, what: str, limit: int) -> str:
    if not isinstance(text, str):
        raise InvalidInputError(f"{what} must be a string, got {type(text).__name__}")
    text = " ".join(without_surrogates(text, f"a {what}").split())
    if not text:
        raise InvalidInputError(f"{what} is empty")
    if len(text) > limit:
        raise InvalidInputError(f"{what} is {len(text)} characters; the limit is {limit}")
    return text


def _one_or_many(values: Any, single: type | tuple[type, ...]) -> Any:
    """A lone value where an iterable is expected is one value (a str is not its characters)."""
    return [values] if isinstance(values, single) else values


class Memory:
    """A preference-aligned memory over one SQLite file. Safe to share across threads."""

    def __init__(
        self,
        store: MemoryStore,
        embedder: Embedder,
        index: VectorIndex,
        *,
        tau: float,
        k: int = 5,
        verifier: Verifier | Callable[[], Verifier] | None = None,
        profile: Profile | None = None,
        vector_format: str = "float32",
        entry_vector: str = LEGACY_ENTRY_VECTOR,
        gate: float | None = None,
        item_gate: float | None = None,
        item_gate_quantile: float | None = None,
        min_score: float | None = None,
        hedge: float | None = None,
        consolidate_threshold: float | None = 0.95,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.index = index
        self.tau = float(tau)
        self.k = int(k)
        self.profile = profile
        # no memory when the question's closest preference is below `gate` and its best
        # entry (raw question, no steering) is below `item_gate`, or, without a fixed
        # item_gate, below what `item_gate_quantile` of the background questions reach in
        # this memory (epic_edge.background); None switches a test off
        self.gate = gate
        self.item_gate = item_gate
        self._background = (BackgroundGate(item_gate_quantile)
                            if item_gate_quantile is not None else None)
        self.hedge = hedge  # steering temperature (see Steering); None: argmax preference
        self.min_score = min_score  # hits scoring below this are dropped
        # a new instruction this close to a stored one of the same preference is merged
        self.consolidate_threshold = consolidate_threshold
        self._verifier = verifier
        self._lock = threading.RLock()
        store.bind_embedder(embedder.fingerprint, embedder.dim, self.tau, vector_format,
                            entry_vector)
        self._indexed = np.empty(0, dtype=np.int64)
        self._reload()

    def _reload(self) -> None:
        """Read preferences and rebuild the vector index from the file (the truth)."""
        with self._lock:
            self._reload_preferences()
            ids, vectors = self.store.entry_vectors(self.embedder.dim)
            self.index.remove(self._indexed)
            self.index.add(ids, vectors)
            self._indexed = ids
            self._entries_changed()

    def _sync(self) -> None:
        """Pick up what another process committed to the same file since we last looked."""
        if self.store.changed_elsewhere():
            self._reload()

    # -- opening ------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        path: str | Path,
        profile: str | Path | Profile = "linux-cpu",
        *,
        embedder: Embedder | None = None,
        verifier: Verifier | None = None,
        index: VectorIndex | None = None,
        tau: float | None = None,
        k: int | None = None,
        model_dir: str | Path | None = None,
        key: bytes | None = None,
        vector_format: str | None = None,
        entry_vector: str | None = None,
        read_only: bool = False,
    ) -> Memory:
        """Open (or create) the memory at `path`; explicit instances override the profile.

        `key` (32 bytes, kept by the app) encrypts item text, instructions, preferences and
        vectors, and hashes item ids. `read_only` opens an existing file without writing it.
        `vector_format` ("float32", "float16", "int8") and `entry_vector` ("item",
        "instruction", "item+instruction": what an entry is indexed by) apply when the file
        is created; default: the profile's index.vectors / index.entry_vector.
        """
        prof = profile if isinstance(profile, Profile) else load_profile(profile)
        models = Path(model_dir) if model_dir else default_model_dir()
        store = MemoryStore(path, key=key, read_only=read_only)
        try:
            emb = embedder or registry.create("embedder", prof.embedder, models)
            stored_tau = store.get_meta("tau")
            if tau is None:
                tau = float(stored_tau) if stored_tau is not None else prof.tau
            idx = index if index is not None else registry.create(
                "index", prof.index or {"backend": "numpy"}, models, dim=emb.dim
            )
            verifier_config = prof.verifier or {"backend": "template"}
            factory = verifier or (lambda: registry.create("verifier", verifier_config, models))
            fmt = vector_format or str(prof.index.get("vectors", "float32"))
            kind = entry_vector or str(prof.index.get("entry_vector", LEGACY_ENTRY_VECTOR))
            # gate and floor are calibrated for the profile's embedder, like tau
            calibrated = prof.retrieval if embedder is None else {}
            return cls(store, emb, idx, tau=tau, k=k or int(prof.retrieval.get("k", 5)),
                       verifier=factory, profile=prof, vector_format=fmt, entry_vector=kind,
                       gate=calibrated.get("gate"), item_gate=calibrated.get("item_gate"),
                       item_gate_quantile=calibrated.get("item_gate_quantile"),
                       min_score=calibrated.get("min_score"), hedge=calibrated.get("hedge"))
        except BaseException:
            store.close()
            raise

    @property
    def verifier(self) -> Verifier:
        """The verifier, built on first use (a query-only app never loads the LLM)."""
        with self._lock:
            if self._verifier is None:
                raise InvalidInputError("this memory has no verifier; pass one to ingest")
            if not isinstance(self._verifier, Verifier):
                self._verifier = self._verifier()
            return self._verifier

    def close(self) -> None:
        with self._lock:
            closer = getattr(self._verifier, "close", None)
            if isinstance(self._verifier, Verifier) and callable(closer):
                closer()
            self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- preferences --------------------------------------------------------------------
    def _reload_preferences(self) -> None:
        prefs, vectors = self.store.preferences(self.embedder.dim)
        self.steering = Steering(prefs, vectors, self.hedge)

    def preferences(self) -> list[Preference]:
        return list(self.steering.preferences)

    def add_preference(self, text: str) -> Preference:
        """Add a stated preference (a duplicate text returns the existing one)."""
        return self.add_preferences([text])[0]

    def add_preferences(self, texts: Iterable[str]) -> list[Preference]:
        """Add preferences in one transaction: all of them or, on error, none."""
        texts = _one_or_many(texts, str)
        cleaned = [_clean_text(t, "preference", MAX_PREFERENCE_CHARS) for t in texts]
        self._sync()
        known = {p.text: p for p in self.steering.preferences}
        new = [t for t in dict.fromkeys(cleaned) if t not in known]
        if len(known) + len(new) > MAX_PREFERENCES:
            raise InvalidInputError(f"a memory holds at most {MAX_PREFERENCES} preferences")
        if new:
            vectors = self.embedder.embed(new)
            with self._lock:
                with self.store.transaction() as conn:
                    stored = self.store.preference_ids_by_text(conn)  # another writer's too
                    for text, vector in zip(new, vectors):
                        pid = stored.get(text) or self.store.insert_preference(conn, text, vector)
                        known[text] = Preference(pid, text)
                self._reload_preferences()
        return [known[t] for t in cleaned]

    def remove_preference(self, preference: int | str | Preference) -> int:
        """Remove a preference and the entries linked to it; returns entries removed."""
        self._sync()
        target = self._find_preference(preference)
        with self._lock:
            with self.store.transaction() as conn:
                entry_ids = self.store.delete_preference(conn, target.id)
            self._forget(entry_ids)
            self._reload_preferences()
            try:
                self.store.vacuum()  # no copy of the removed text stays in the file or its WAL
            except MemoryFileError as exc:  # the removal is committed: report, do not fail
                log.warning("preference removed; compacting the file failed (%s). Its freed "
                            "pages were overwritten with zeros and will be reused; the next "
                            "removal or budget run compacts it", exc.__cause__ or exc)
        return len(entry_ids)

    def _index_add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        fmt = self.store.vector_format
        if fmt != "float32" and len(vectors):  # search what the file holds, as after a reopen
            vectors = np.stack([decode(encode(v, fmt), self.embedder.dim, fmt) for v in vectors])
        self.index.add(ids, vectors)
        self._indexed = np.union1d(self._indexed, ids)
        self._entries_changed()

    def _forget(self, entry_ids: Iterable[int]) -> None:
        gone = np.asarray(list(entry_ids), dtype=np.int64)
        self.index.remove(gone)
        self._indexed = self._indexed[~np.isin(self._indexed, gone)]
        self._entries_changed()

    def _entries_changed(self) -> None:
        if getattr(self, "_background", None) is not None:
            self._background.invalidate()

    def item_gate_now(self) -> float | None:
        """The item gate in force: the fixed `item_gate`, else this memory's background cut."""
        if self.item_gate is not None or self._background is None:
            return self.item_gate
        with self._lock:
            return self._background.threshold(self.embedder, self.index)

    def _find_preference(self, preference: int | str | Preference) -> Preference:
        key = preference.id if isinstance(preference, Preference) else preference
        for pref in self.steering.preferences:
            if pref.id == key or pref.text == key:
                return pref
        raise InvalidInputError(f"no preference {key!r} in this memory")

    # -- ingest -------------------------------------------------------------------------
    def ingest_batches(self, items: Iterable[Any], batch_size: int = 32) -> Iterator[BatchStats]:
        """Ingest a stream of items, one transaction per batch; yields each batch's stats.

        A lone str, bytes, Item or dict is one item.
        """
        items = _one_or_many(items, (str, bytes, bytearray, Item, dict))
        if batch_size < 1:
            raise InvalidInputError("batch_size must be at least 1")
        if not self.steering.preferences:
            raise InvalidInputError("add at least one preference before ingesting items")
        self._sync()
        ingester = BatchIngester(self)
        budget = Budget.load(self.store)
        stream = iter(items)
        while batch := list(islice(stream, batch_size)):
            stats = ingester.run(batch)
            if budget.max_entries is not None or budget.max_bytes is not None:
                with self._lock:
                    evicted = enforce_budget(self.store, budget)
                    self._forget(evicted)
                stats.evicted = len(evicted)
            yield stats

    def ingest(self, items: Iterable[Any], batch_size: int = 32) -> list[BatchStats]:
        """Ingest items (str, bytes, Item or {"text", "source", "id"}); per-batch stats."""
        return list(self.ingest_batches(items, batch_size))

    # -- retrieval ----------------------------------------------------------------------
    def lookup(
        self,
        question: str,
        k: int | None = None,
        *,
        steer: bool = True,
        gate: float | None = None,
        min_score: float | None = None,
        item_gate: float | None = None,
    ) -> Retrieval:
        """Top-k entries with the reason memory is (not) used; see epic_edge.retrieval.

        `gate`, `item_gate` and `min_score` default to this memory's (from the profile,
        calibrated for its embedder); gate=-1 switches the memory-use gate off for one call.
        """
        question = _clean_text(question, "question", MAX_QUESTION_CHARS)
        k = self.k if k is None else int(k)
        if not 1 <= k <= MAX_K:
            raise InvalidInputError(f"k must be between 1 and {MAX_K}, got {k}")
        self._sync()
        return lookup(self, question, k, steer=steer,
                      gate=self.gate if gate is None else gate,
                      item_gate=self.item_gate_now() if item_gate is None else item_gate,
                      min_score=self.min_score if min_score is None else min_score)

    def retrieve(
        self,
        question: str,
        k: int | None = None,
        *,
        steer: bool = True,
        timings: dict[str, float] | None = None,
        gate: float | None = None,
        min_score: float | None = None,
    ) -> list[Hit]:
        """Top-k entries for a question, steered toward its closest preference by default.

        Pass a dict as `timings` to receive seconds per step (embed, steer, search, fetch).
        """
        found = self.lookup(question, k, steer=steer, gate=gate, min_score=min_score)
        if timings is not None:
            timings.update(found.timings)
        return found.hits

    def context(self, question: str, k: int | None = None, regime: str = "conservative") -> str:
        """The block an app puts in its LLM prompt; empty when memory should stay out.

        Regimes (epic_edge.context.REGIMES): conservative (default: stricter gate and floor,
        at most 3 notes, told to ignore them for factual questions), ordinary, aggressive.
        """
        rules = regime_rules(regime)
        gate, item_gate, floor = rules.thresholds(self.gate, self.item_gate_now(), self.min_score)
        found = self.lookup(question, min(k or self.k, rules.max_hits),
                            gate=-1.0 if gate is None else gate, item_gate=item_gate,
                            min_score=-1.0 if floor is None else floor)
        return format_context(found.hits, rules.header)

    # -- inspecting, editing, moving: epic_edge.inspection and epic_edge.transfer --------
    def entries(
        self, offset: int = 0, limit: int = 50, preference: int | str | None = None
    ) -> list[inspection.Entry]:
        """A page of stored entries (item, preference, instruction, confidence), oldest first."""
        return inspection.list_entries(self, offset, limit, preference)

    def forget(self, item: int | str) -> int:
        """Delete one item (its number in `entries()`, or the id it was ingested with) and
        its entries; returns entries removed."""
        return inspection.forget_item(self, item)

    def explain(self, text: str) -> inspection.Explanation:
        """Why `text` would (not) be kept now: similarity per preference, tau, the verifier's
        verdict with P(Keep) and threshold. Stores nothing."""
        return inspection.explain(self, text)

    def export_jsonl(self, path: str | Path) -> dict[str, int]:
        """Write the whole memory (preferences, items, entries) to a JSONL file (owner-only)."""
        return transfer.export_memory(self, path)

    def import_jsonl(self, path: str | Path) -> dict[str, int]:
        """Merge an `export_jsonl` file into this memory; re-embeds if the embedder differs."""
        return transfer.import_memory(self, path)

    # -- reporting ----------------------------------------------------------------------
    def set_budget(
        self,
        max_entries: int | None = None,
        max_bytes: int | None = None,
        half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
    ) -> int:
        """Cap the memory (stored in the file); evicts at once; returns entries evicted.

        Eviction drops the entries with the lowest confidence x 0.5 ** (age / half-life):
        see epic_edge.maintenance.retention_order.
        """
        for name, value in (("max_entries", max_entries), ("max_bytes", max_bytes)):
            if value is not None and value < 0:
                raise InvalidInputError(f"{name} must be >= 0")
        budget = Budget(max_entries, max_bytes, half_life_days)
        with self._lock:
            budget.save(self.store)
            evicted = enforce_budget(self.store, budget)
            self._forget(evicted)
        return len(evicted)

    def check(self) -> CheckReport:
        """Integrity of the file, and that the vector index matches its entries."""
        self._sync()  # another writer's commits are not a mismatch
        with self._lock:
            report = check(self.store)
            if len(self.index) != report.counts.get("entries", len(self.index)):
                report.problems.append(
                    f"index holds {len(self.index)} vectors for {report.counts['entries']} entries"
                )
        return report

    def footprint(self) -> dict[str, int]:
        """Bytes on disk by part (items, instructions, vectors, preferences, ...)."""
        return self.store.footprint()

    def info(self) -> dict[str, Any]:
        return {
            "path": str(self.store.path),
            "profile": self.profile.name if self.profile else None,
            "embedder": self.embedder.fingerprint,
            "tau": self.tau,
            "k": self.k,
            "preferences": len(self.steering),
            "items": self.store.count("items"),
            "entries": self.store.count("entries"),
            "items_judged": self.store.count("judged"),
            "budget": asdict(Budget.load(self.store)),
            "evicted_total": int(self.store.get_meta("evicted_total") or 0),
            "footprint": self.footprint(),
            "created_at": time.strftime(
                "%Y-%m-%d %H:%M:%S", time.localtime(float(self.store.get_meta("created_at") or 0))
            ),
        }
