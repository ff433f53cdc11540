"""No-LLM verifier: keeps every coarse-filter candidate with a deterministic instruction."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from epic_edge.decision import decide
from epic_edge.types import Preference, Verdict


class TemplateVerifier:
    """For devices without an LLM: coarse filter + steering only (0 LLM calls per item)."""

    def __init__(self, max_preferences_per_item: int = 2) -> None:
        self.max_preferences_per_item = max_preferences_per_item

    @classmethod
    def from_config(cls, config: dict[str, Any], model_dir: Path) -> TemplateVerifier:
        return cls(int(config.get("max_preferences_per_item", 2)))

    def verify(self, item: str, candidates: Sequence[Preference]) -> Verdict:
        """P(Keep) = 1 for every candidate; the decision module files it under the first
        `max_preferences_per_item` with template instructions."""
        if not candidates:
            return Verdict.discard("no candidate preference")
        return decide(item, candidates, [1.0] * len(candidates), threshold=1.0,
                      max_preferences=self.max_preferences_per_item)
