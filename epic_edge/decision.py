"""The decision: P(Keep) per candidate preference -> Verdict, the same for every verifier.

A verifier only scores (one P(Keep) per candidate) and, where it can, writes instructions;
this module applies the guards, the threshold, the ranking, the instruction fallback and
writes the reason, so a decision means the same thing on every backend.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

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
           llm_calls: int = 0) -> Verdict:
    """Keep when the best P(Keep) >= threshold, filed under the best `max_preferences`
    candidates at or above it (ties keep the coarse filter's order); instructions come from
    `write` (called only for a kept item) or the template where it wrote none usable."""
    candidates = list(candidates)
    scores = np.asarray(probs, dtype=np.float64).reshape(-1)
    p_keep = float(scores.max())
    if p_keep < threshold:
        return Verdict.discard(reason=f"P(Keep)={p_keep:.3f} < threshold {threshold:.3f}",
                               llm_calls=llm_calls, confidence=1.0 - p_keep)
    order = [int(k) for k in np.argsort(-scores, kind="stable") if scores[k] >= threshold]
    kept = [candidates[k] for k in order[: max(1, int(max_preferences))]]
    texts, notes, calls = write(item, candidates, kept) if write else ({}, [], 0)
    instructions = {p.id: usable_instruction(texts.get(p.id, ""), item, p) for p in kept}
    reason = "; ".join([f"P(Keep)={p_keep:.3f} >= threshold {threshold:.3f}", *notes])
    return Verdict(keep=True, preference_ids=[p.id for p in kept], instructions=instructions,
                   reason=reason, confidence=p_keep, llm_calls=llm_calls + calls)


def usable_instruction(text: str, item: str, preference: Preference) -> str:
    """`text` on one printable line, or the template when it holds too few letters."""
    text = " ".join("".join(c if c.isprintable() else " " for c in str(text)).split())
    if sum(ch.isalpha() for ch in text) < MIN_LETTERS:
        return template_instruction(item, preference)
    return text
