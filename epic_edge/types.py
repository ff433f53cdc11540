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

    @classmethod
    def discard(cls, reason: str, llm_calls: int = 0, confidence: float = 0.0,
                threshold: float | None = None) -> Verdict:
        return cls(keep=False, reason=reason, llm_calls=llm_calls, confidence=confidence,
                   threshold=threshold)


@dataclass(frozen=True)
class Hit:
    """One retrieved memory entry."""

    entry_id: int
    score: float
    instruction: str
    item_text: str
    preference: Preference
    source: str = ""
    confidence: float = 1.0


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
    seconds: dict[str, float] = field(default_factory=dict)

    def add_time(self, stage: str, seconds: float) -> None:
        self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds

    def merge(self, other: BatchStats) -> None:
        for name in ("seen", "duplicates", "rejected", "passed_filter", "verified", "kept",
                     "entries_added", "llm_calls", "evicted", "consolidated", "replaced",
                     "failed"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for stage, secs in other.seconds.items():
            self.add_time(stage, secs)
