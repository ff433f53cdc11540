"""Plain data types shared by every layer: preferences, items, verdicts, hits and batch stats."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Preference:
    """A stated user preference; `id` is the memory's row id (0 before it is stored)."""

    id: int
    text: str


@dataclass(frozen=True)
class Item:
    """One piece of content the device has seen (a passage, a chat turn, a page)."""

    text: str
    source: str = ""
    id: str = ""


@dataclass
class Verdict:
    """What a Verifier says of one item against its candidate preferences.

    `instructions` maps each kept preference id to a short usage instruction.
    `confidence` is the probability of the decision (P(Keep) when kept), in [0, 1].
    `threshold` is the P(Keep) a sure keep needs, for a verifier that scores: an item kept
    below it (by a floor, while the memory has room) is among the first its budget evicts.
    """

    keep: bool
    preference_ids: list[int] = field(default_factory=list)
    instructions: dict[int, str] = field(default_factory=dict)
    reason: str = ""
    confidence: float = 1.0
    llm_calls: int = 0
    threshold: float | None = None

    @property
    def p_keep(self) -> float | None:
        """The decision's P(Keep): its confidence when kept; 1 - confidence when discarded by
        a verifier that scores (one with a threshold); None for one that does not."""
        if self.keep:
            return self.confidence
        return 1.0 - self.confidence if self.threshold is not None else None

    @classmethod
    def discard(cls, reason: str, llm_calls: int = 0, confidence: float = 0.0,
                threshold: float | None = None) -> Verdict:
        return cls(keep=False, reason=reason, llm_calls=llm_calls, confidence=confidence,
                   threshold=threshold)


@dataclass(frozen=True)
class Hit:
    """One retrieved memory entry.

    `score` is what the hit was ranked by: its vector score (`similarity`, what the floor
    and the gates are calibrated on) plus the evidence of the memory's ranking (lexical,
    confidence, brevity: epic_edge.ranking), so hits come in falling `score`. `item_id` is
    the item's number in this memory and `external_id` the id it was ingested with (with a
    key, its keyed hash): either one is what `forget` takes.
    """

    entry_id: int
    score: float
    instruction: str
    item_text: str
    preference: Preference
    source: str = ""
    confidence: float = 1.0
    item_id: int = 0
    external_id: str = ""
    similarity: float = 0.0


@dataclass
class BatchStats:
    """Figures for one ingest batch (one SQLite transaction)."""

    seen: int = 0
    duplicates: int = 0
    rejected: int = 0
    passed_filter: int = 0
    verified: int = 0
    kept: int = 0
    entries_added: int = 0
    llm_calls: int = 0
    evicted: int = 0
    consolidated: int = 0
    replaced: int = 0
    failed: int = 0  # items the verifier failed on: not recorded as judged, judged next time
    forgotten: int = 0  # items `forget` deleted before, not stored again (allow_forgotten)
    seconds: dict[str, float] = field(default_factory=dict)

    def add_time(self, stage: str, seconds: float) -> None:
        self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds

    def merge(self, other: BatchStats) -> None:
        for name in ("seen", "duplicates", "rejected", "passed_filter", "verified", "kept",
                     "entries_added", "llm_calls", "evicted", "consolidated", "replaced",
                     "failed", "forgotten"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for stage, secs in other.seconds.items():
            self.add_time(stage, secs)


@dataclass
class Outcome:
    """What one ingest did with one item (after cleaning and chunking), as it decided it.

    `stage` is where it was settled: "empty", "duplicate" (the same text earlier in the
    batch), "forgotten" (a tombstone), "already judged" (under today's preferences),
    "coarse filter", "already filed", "verifier failed", "verifier" (discarded) or "kept";
    `preference_ids` are those it was kept for and `p_keep` the decision's P(Keep), where
    a verifier scored it.
    """

    key: bytes
    external_id: str
    stage: str
    reason: str
    preference_ids: list[int] = field(default_factory=list)
    p_keep: float | None = None
