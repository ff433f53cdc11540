"""The prompt block an app hands its LLM, under a personalisation regime."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from epic_edge.errors import InvalidInputError
from epic_edge.types import Hit


@dataclass(frozen=True)
class Regime:
    """How eagerly memory enters a prompt. Margins add to the memory's calibrated gates
    (preference and best-entry evidence) and score floor; None switches that check off. A
    memory without calibrated values is not gated by any regime (its embedder's scale is
    unknown)."""

    name: str
    gate_margin: float | None
    floor_margin: float | None
    max_hits: int
    header: str

    def thresholds(
        self, gate: float | None, item_gate: float | None, floor: float | None
    ) -> tuple[float | None, float | None, float | None]:
        """(gate, item_gate, floor) under this regime; None = that check is off."""
        def shift(value: float | None, margin: float | None) -> float | None:
            return None if value is None or margin is None else value + margin

        return (shift(gate, self.gate_margin), shift(item_gate, self.gate_margin),
                shift(floor, self.floor_margin))


REGIMES = {
    # the calibrated gates already withhold memory from the questions that bear on no
    # preference (bench/results/quality.json): conservative narrows what enters, not when
    "conservative": Regime(
        "conservative", 0.0, 0.05, 3,
        "Notes from the user's own memory. Use a note only if the question plainly concerns "
        "what the note's preference is about; for a factual or general question, answer from "
        "general knowledge and do not mention the notes or the user's preferences."),
    "ordinary": Regime(
        "ordinary", 0.0, 0.0, 5,
        "Notes from the user's own memory. Each names the preference it concerns and how to "
        "read it. Use a note where it bears on the question; ignore the rest."),
    "aggressive": Regime(
        "aggressive", None, None, 5,
        "Notes from the user's own memory. Tailor the answer to the user's preferences they "
        "name, and follow each note's reading guidance."),
}


def regime_rules(name: str) -> Regime:
    if name not in REGIMES:
        raise InvalidInputError(f"unknown regime {name!r}; choose from {', '.join(REGIMES)}")
    return REGIMES[name]


def format_context(
    hits: Sequence[Hit], header: str = REGIMES["ordinary"].header, max_chars_per_item: int = 1200
) -> str:
    """Render hits as numbered notes; no hits renders as an empty string (memory stays out)."""
    if not hits:
        return ""
    lines = [header, ""]
    for n, hit in enumerate(hits, 1):
        content = hit.item_text
        if len(content) > max_chars_per_item:
            content = content[:max_chars_per_item].rsplit(" ", 1)[0] + " ..."
        lines.append(f"[{n}] Preference: {hit.preference.text}")
        lines.append(f"    How to use it: {hit.instruction}")
        lines.append(f"    Content: {content}")
        if hit.source:
            lines.append(f"    Source: {hit.source}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
