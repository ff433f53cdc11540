"""No-LLM verifier: keeps every coarse-filter candidate with a deterministic instruction."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from epic_edge.backends.verifier_prompts import template_instruction
from epic_edge.types import Preference, Verdict


class TemplateVerifier:
    """For devices without an LLM: coarse filter + steering only (0 LLM calls per item)."""

    def __init__(self, max_preferences_per_item: int = 2) -> None:
        self.max_preferences_per_item = max_preferences_per_item

    @classmethod
    def from_config(cls, config: dict[str, Any], model_dir: Path) -> TemplateVerifier:
        return cls(int(config.get("max_preferences_per_item", 2)))

    def verify(self, item: str, candidates: Sequence[Preference]) -> Verdict:
        kept = list(candidates)[: self.max_preferences_per_item]
        if not kept:
            return Verdict.discard("no candidate preference")
        return Verdict(
            keep=True,
            preference_ids=[p.id for p in kept],
            instructions={p.id: template_instruction(item, p) for p in kept},
            reason="template verifier keeps every candidate",
            confidence=1.0,
        )
