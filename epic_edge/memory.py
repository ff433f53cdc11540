"""Memory: the object an app embeds; one memory file, one embedder, a verifier, an index."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

from epic_edge import inspection, preference_edits, transfer
from epic_edge.asking import Asking
from epic_edge.background import BackgroundGate
from epic_edge.entry_index import EntryIndex
from epic_edge.errors import InvalidInputError
from epic_edge.ingest import BatchIngester
from epic_edge.lexical import LexicalEvidence
from epic_edge.limits import MAX_BATCH, one_or_many
from epic_edge.maintenance import (
    DEFAULT_HALF_LIFE_DAYS,
    Budget,
    CheckReport,
    check,
    evict_to_budget,
)
from epic_edge.opening import open_memory
from epic_edge.profiles import Profile
from epic_edge.protocols import Embedder, VectorIndex, Verifier
from epic_edge.question_gate import QuestionGate
from epic_edge.ranking import BrevityEvidence, ConfidenceEvidence
from epic_edge.remembering import Remembered, remember
from epic_edge.settings import MemorySettings
from epic_edge.stages import Steering
from epic_edge.store import MemoryStore
from epic_edge.types import BatchStats, Item, Preference
from epic_edge.vectors import LEGACY_ENTRY_VECTOR


class Memory(Asking, inspection.Inspecting):
    """A preference-aligned memory over one SQLite file. Safe to share across threads."""

    def __init__(
        self,
        store: MemoryStore,
        embedder: Embedder,
        index: VectorIndex,
        *,
        tau: float,
        settings: MemorySettings | None = None,
        verifier: Verifier | Callable[[], Verifier] | None = None,
        profile: Profile | None = None,
        vector_format: str = "float32",
        entry_vector: str = LEGACY_ENTRY_VECTOR,
        model_dir: Path | None = None,
    ) -> None:
        """`settings`: how it ranks, gates and merges (default: every knob off but
        consolidation; Memory.open builds them from the profile). `model_dir`: where a
        question gate the settings name by a relative path lives (default: the model folder,
        epic_edge.models)."""
        self.store = store
        self.embedder = embedder
        self.tau = float(tau)
        self.profile = profile
        # the ranking's cached per-entry evidence (epic_edge.lexical, epic_edge.ranking)
        self.lexical_evidence = LexicalEvidence()
        self.confidence_evidence = ConfidenceEvidence()
        self.brevity_evidence = BrevityEvidence()
        self._verifier = verifier
        store.bind_embedder(embedder.fingerprint, embedder.dim, self.tau, vector_format,
                            entry_vector)
        self.entry_index = EntryIndex(index, embedder.dim, store.vector_format)
        self._lock = self.entry_index.lock  # one lock: index, preferences, verifier
        self._settings = settings or MemorySettings()
        self.background = self._background(self._settings)
        self._models = model_dir
        self.question_gate = QuestionGate.named(self._settings.question_gate, model_dir)
        self._reload()

    @property
    def settings(self) -> MemorySettings:
        """How this memory ranks, gates and merges (epic_edge.settings)."""
        return self._settings

    @settings.setter
    def settings(self, settings: MemorySettings) -> None:
        """Change the knobs at once (`memory.settings = memory.settings.replace(...)`)."""
        with self._lock:
            old, self._settings = self._settings, settings
            if settings.item_gate_quantile != old.item_gate_quantile:
                self.background = self._background(settings)
            if settings.question_gate != old.question_gate:
                self.question_gate = QuestionGate.named(settings.question_gate, self._models)
            if (settings.hedge, settings.steer_weight, settings.steer_by) != (
                    old.hedge, old.steer_weight, old.steer_by):
                self.reload_preferences()

    @staticmethod
    def _background(settings: MemorySettings) -> BackgroundGate | None:
        """The gate's background cut at item_gate_quantile (epic_edge.background), if set."""
        quantile = settings.item_gate_quantile
        return BackgroundGate(quantile) if quantile is not None else None

    @property
    def index(self) -> VectorIndex:
        """The vector index (entry_index owns it; search it through entry_index)."""
        return self.entry_index.index

    def _reload(self) -> None:
        """Read preferences and rebuild the vector index from the file (the truth)."""
        with self._lock:
            self.reload_preferences()
            self.entry_index.replace_all(*self.store.entry_vectors(self.embedder.dim))

    def sync(self) -> None:
        """Pick up what another process committed to the same file since we last looked."""
        if self.store.changed_elsewhere():
            self._reload()

    def item_gate_now(self) -> float | None:
        """The item gate in force: the fixed `item_gate`, else this memory's background cut."""
        item_gate = self._settings.item_gate
        if item_gate is not None or self.background is None:
            return item_gate
        return self.background.threshold(self.embedder, self.entry_index)

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
        return open_memory(cls, path, profile, embedder=embedder, verifier=verifier,
                           index=index, tau=tau, k=k, model_dir=model_dir, key=key,
                           vector_format=vector_format, entry_vector=entry_vector,
                           read_only=read_only)

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
    def reload_preferences(self) -> None:
        prefs, vectors = self.store.preferences(self.embedder.dim)
        knobs = self._settings
        self.steering = Steering(prefs, vectors, knobs.hedge, knobs.steer_weight, knobs.steer_by)

    def preferences(self) -> list[Preference]:
        return list(self.steering.preferences)

    def add_preference(self, text: str) -> Preference:
        """Add a stated preference (a duplicate text returns the existing one)."""
        return self.add_preferences([text])[0]

    def add_preferences(self, texts: Iterable[str]) -> list[Preference]:
        """Add preferences in one transaction: all of them or, on error, none."""
        return preference_edits.add_preferences(self, texts)

    def remove_preference(self, preference: int | str | Preference) -> int:
        """Remove a preference and the entries linked to it; returns entries removed."""
        return preference_edits.remove_preference(self, preference)

    # -- ingest -------------------------------------------------------------------------
    def ingest_batches(self, items: Iterable[Any], batch_size: int = 32, *,
                       allow_forgotten: bool = False) -> Iterator[BatchStats]:
        """Ingest a stream of items, one transaction per batch; yields each batch's stats.

        A lone str, bytes, Item or dict is one item. An item `forget` deleted is not stored
        again (stats.forgotten counts it) unless `allow_forgotten`.
        """
        yield from self.run_ingester(BatchIngester(self, allow_forgotten), items, batch_size)

    def run_ingester(self, ingester: BatchIngester, items: Iterable[Any],
                     batch_size: int = 32) -> Iterator[BatchStats]:
        """ingest_batches with a given BatchIngester (remembering.remember records outcomes)."""
        items = one_or_many(items, (str, bytes, bytearray, Item, dict))
        if not 1 <= batch_size <= MAX_BATCH:
            raise InvalidInputError(f"batch_size must be between 1 and {MAX_BATCH}")
        if not self.steering.preferences:
            raise InvalidInputError("add at least one preference before ingesting items")
        self.sync()
        budget = Budget.load(self.store)
        stream = iter(items)
        while batch := list(islice(stream, batch_size)):
            stats = ingester.run(batch)
            stats.evicted = len(evict_to_budget(self.store, self.entry_index, budget))
            self.store.checkpoint()
            yield stats

    def ingest(self, items: Iterable[Any], batch_size: int = 32, *,
               allow_forgotten: bool = False) -> list[BatchStats]:
        """Ingest items (str, bytes, Item or {"text", "source", "id"}); per-batch stats."""
        return list(self.ingest_batches(items, batch_size, allow_forgotten=allow_forgotten))

    def remember(self, item: Any, *, allow_forgotten: bool = False) -> Remembered:
        """Ingest one item and say what became of it: kept (item id, entries, preferences)
        or dropped (stage and reason), chunk by chunk: see epic_edge.remembering."""
        return remember(self, item, allow_forgotten)

    # -- moving: epic_edge.transfer -------------------------------------------------------
    def export_jsonl(self, path: str | Path) -> dict[str, int]:
        """Write the whole memory (preferences, items, entries) to a JSONL file (owner-only)."""
        return transfer.export_memory(self, path)

    def import_jsonl(self, path: str | Path | transfer.Export,
                     allow_forgotten: bool = False) -> dict[str, int]:
        """Merge an `export_jsonl` file into this memory (all of it or, on error, nothing);
        re-embeds if the embedder differs; forgotten items stay out unless allowed."""
        return transfer.import_memory(self, path, allow_forgotten)

    # -- upkeep (entries, forget, explain, footprint, info: inspection.Inspecting) ----------
    def set_budget(
        self,
        max_entries: int | None = None,
        max_bytes: int | None = None,
        half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
    ) -> int:
        """Cap the memory (stored in the file); evicts at once; returns entries evicted.

        Eviction takes what a verifier floor kept below its threshold first, then from the
        preference holding the most entries, its lowest confidence x 0.5 ** (age / half-life)
        first: see epic_edge.maintenance.retention_order.
        """
        for name, value in (("max_entries", max_entries), ("max_bytes", max_bytes)):
            if value is not None and value < 0:
                raise InvalidInputError(f"{name} must be >= 0")
        budget = Budget(max_entries, max_bytes, half_life_days)
        return len(evict_to_budget(self.store, self.entry_index, budget, save=True))

    def check(self) -> CheckReport:
        """Integrity of the file, and that the vector index matches its entries."""
        self.sync()  # another writer's commits are not a mismatch
        with self._lock:
            return check(self.store, len(self.entry_index))
