"""A memory's tuning knobs in one frozen dataclass, built from a profile's [retrieval]."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from epic_edge.config_schema import COSINE
from epic_edge.errors import InvalidInputError
from epic_edge.profiles import RETRIEVAL_OPTIONS, Profile
from epic_edge.stages import PAPER_STEER_BY, PAPER_STEER_WEIGHT

# what a setting may hold beyond [retrieval]'s keys (None switches a test off)
OPTIONS = {**{k: v for k, v in RETRIEVAL_OPTIONS.items() if k != "calibrated_for"},
           "consolidate_threshold": COSINE}
REQUIRED = ("k", "steer_weight", "steer_by")  # the others: None switches the knob off


@dataclass(frozen=True)
class MemorySettings:
    """How a memory ranks, gates and merges; None switches the knob off.

    k: hits per lookup. gate / item_gate / item_gate_quantile: the memory-use gate
    (epic_edge.retrieval; the quantile sets the item gate from this memory's background cut,
    epic_edge.background). question_gate: the file of the question gate that withholds memory
    from a question no preference bears on (epic_edge.question_gate; a shipped name or a path
    in the model folder); question_gate_below: it withholds only where the closest preference
    is below this similarity (unset: everywhere). min_score: hits scoring below it drop. hedge,
    steer_weight, steer_by: how a question is steered (stages.Steering); ease_steering_from,
    no_steering_from: the raw question's best entry score from which the pull eases, and at
    which it stops (retrieval.eased_weight; unset: always the full pull). lexical,
    confidence, brevity: the ranking's evidence weights (epic_edge.ranking).
    consolidate_threshold: a new instruction this close to a stored one of the same item and
    preference refreshes it (epic_edge.ingest).
    """

    k: int = 5
    gate: float | None = None
    item_gate: float | None = None
    item_gate_quantile: float | None = None
    question_gate: str | None = None
    question_gate_below: float | None = None
    min_score: float | None = None
    hedge: float | None = None
    steer_weight: float = PAPER_STEER_WEIGHT
    steer_by: str = PAPER_STEER_BY
    ease_steering_from: float | None = None
    no_steering_from: float | None = None
    lexical: float | None = None
    confidence: float | None = None
    brevity: float | None = None
    consolidate_threshold: float | None = 0.95

    def __post_init__(self) -> None:
        for key, value in asdict(self).items():
            problem = ("must be set" if key in REQUIRED else "") if value is None \
                else OPTIONS[key].problem(value)
            if problem:
                raise InvalidInputError(f"memory settings: {key} {problem}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemorySettings:
        """The settings `data` names (the others keep their default); a one-line
        InvalidInputError for an unknown key or a bad value."""
        unknown = sorted(set(data) - set(OPTIONS))
        if unknown:
            raise InvalidInputError(f"memory settings: {unknown[0]} is not a known key "
                                    f"(known: {', '.join(sorted(OPTIONS))})")
        return cls(**dict(data))

    @classmethod
    def from_retrieval(cls, retrieval: Mapping[str, Any], calibrated: bool = True,
                       k: int | None = None) -> MemorySettings:
        """From a profile's [retrieval]: its k, and its gate, floor and ranking when
        `calibrated` (they hold for the embedder in use; unset: off). `k` overrides the
        profile's; `calibrated_for` is the profile's note, not a setting."""
        data = {key: value for key, value in retrieval.items() if key != "calibrated_for"}
        chosen = {key: value for key, value in data.items() if calibrated or key == "k"}
        return cls.from_dict({**chosen, **({"k": int(k)} if k else {})})

    @classmethod
    def from_profile(cls, profile: Profile, calibrated: bool = True,
                     k: int | None = None) -> MemorySettings:
        """From a Profile's [retrieval] (see from_retrieval)."""
        return cls.from_retrieval(profile.retrieval, calibrated, k)

    def replace(self, **changes: Any) -> MemorySettings:
        """A copy with `changes`, checked as from_dict checks them."""
        return self.from_dict({**asdict(self), **changes})

    def ranking(self) -> dict[str, float | None]:
        """The evidence weights, as ranking.weighted takes them."""
        return {"lexical": self.lexical, "confidence": self.confidence, "brevity": self.brevity}
