"""The decision: P(Keep) per candidate preference -> Verdict, the same for every verifier.

A verifier only scores (one P(Keep) per candidate) and, where it can, writes instructions;
this module applies the guards, the threshold, the ranking, the instruction fallback and
writes the reason, so a decision means the same thing on every backend.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from epic_edge.errors import ProfileError, VerdictError
from epic_edge.instructions import template_instruction
from epic_edge.types import Preference, Verdict

# write(item, candidates, kept) -> (instruction per kept preference id, notes, LLM calls)
Writer = Callable[[str, list[Preference], list[Preference]], tuple[dict[int, str], list[str], int]]
MIN_LETTERS = 3  # an instruction with fewer letters is no instruction: the template replaces it


def guard(item: str, candidates: Sequence[Preference]) -> Verdict | None:
    """The verdict for what needs no scoring (no candidate, empty item); None otherwise."""
    if not candidates:
        return Verdict.discard(reason="no candidate preferences")
    if not item or not item.strip():
        return Verdict.discard(reason="empty item")
    return None


def decide(item: str, candidates: Sequence[Preference], probs: Sequence[float], *,
           threshold: float, max_preferences: int, write: Writer | None = None,
           llm_calls: int = 0, floor: float | None = None) -> Verdict:
    """Keep when the best P(Keep) >= threshold, filed under the best `max_preferences`
    candidates at or above it (ties keep the coarse filter's order); instructions come from
    `write` (called only for a kept item) or the template where it wrote none usable.

    With a `floor`, an item between floor and threshold is kept too, to fill a memory while it
    has room: its entry is among the first the budget evicts (maintenance.retention_order)."""
    candidates = list(candidates)
    scores = np.asarray(probs, dtype=np.float64).reshape(-1)
    if len(scores) != len(candidates) or not np.all((scores >= 0.0) & (scores <= 1.0)):
        # NaN, inf or out of range: the model gave no probability, so nothing is decided
        raise VerdictError(f"the verifier's P(Keep) is not a probability ({len(scores)} "
                           f"scores for {len(candidates)} candidates)")
    p_keep = float(scores.max())
    cut = threshold if floor is None or p_keep >= threshold else floor
    if p_keep < cut:
        return Verdict.discard(reason=f"P(Keep)={p_keep:.3f} < {_cut_name(threshold, floor)}",
                               llm_calls=llm_calls, confidence=1.0 - p_keep,
                               threshold=threshold)
    order = [int(k) for k in np.argsort(-scores, kind="stable") if scores[k] >= cut]
    kept = [candidates[k] for k in order[: max(1, int(max_preferences))]]
    texts, notes, calls = write(item, candidates, kept) if write else ({}, [], 0)
    instructions = {p.id: usable_instruction(texts.get(p.id, ""), item, p) for p in kept}
    why = (f"P(Keep)={p_keep:.3f} >= threshold {threshold:.3f}" if cut == threshold else
           f"P(Keep)={p_keep:.3f} >= floor {floor:.3f}: kept while the memory has room")
    return Verdict(keep=True, preference_ids=[p.id for p in kept], instructions=instructions,
                   reason="; ".join([why, *notes]), confidence=p_keep,
                   llm_calls=llm_calls + calls, threshold=threshold)


def keep_levels(threshold: Any, floor: Any = None) -> tuple[float, float | None]:
    """(threshold, floor) of a verifier's config: a floor at or above the threshold keeps
    nothing more, so it is none (a profile's floor stays valid when a caller lowers the
    threshold under it)."""
    threshold = float(threshold)
    if floor is None or float(floor) >= threshold:
        return threshold, None
    if float(floor) < 0.0:
        raise ProfileError(f"verifier floor {floor} is negative")
    return threshold, float(floor)


def _cut_name(threshold: float, floor: float | None) -> str:
    return (f"threshold {threshold:.3f}" if floor is None else f"floor {floor:.3f} (threshold "
            f"{threshold:.3f})")


def usable_instruction(text: str, item: str, preference: Preference) -> str:
    """`text` on one printable line, or the template when it holds too few letters."""
    text = " ".join("".join(c if c.isprintable() else " " for c in str(text)).split())
    if sum(ch.isalpha() for ch in text) < MIN_LETTERS:
        return template_instruction(item, preference)
    return text
