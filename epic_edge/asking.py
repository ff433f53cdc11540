"""Memory's question API (mixed into epic_edge.memory.Memory): lookup with the memory's own
gates and floor, retrieve (the hits alone) and context (the block an app puts in a prompt)."""

from __future__ import annotations

from typing import Any, Protocol

from epic_edge.context import format_context, regime_rules
from epic_edge.errors import InvalidInputError
from epic_edge.limits import MAX_K, MAX_QUESTION_CHARS, clean_text
from epic_edge.question_gate import QuestionGate
from epic_edge.retrieval import Retrieval, Searched, lookup
from epic_edge.types import Hit


class Asked(Searched, Protocol):
    """What a question reads of a memory beyond a lookup's parts; Memory is one."""

    question_gate: QuestionGate | None

    def sync(self) -> None: ...

    def item_gate_now(self) -> float | None: ...

    def lookup(self, question: str, k: int | None = None, **options: Any) -> Retrieval: ...


class Asking:
    """lookup, retrieve and context, with the memory's settings as defaults."""

    def lookup(
        self: Asked,
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
        calibrated for its embedder); gate=-1 switches the memory-use gate off for one call,
        the question gate (epic_edge.question_gate) with it.
        """
        question = clean_text(question, "question", MAX_QUESTION_CHARS)
        k = self.settings.k if k is None else int(k)
        if not 1 <= k <= MAX_K:
            raise InvalidInputError(f"k must be between 1 and {MAX_K}, got {k}")
        self.sync()
        gate = self.settings.gate if gate is None else gate
        return lookup(self, question, k, steer=steer, gate=gate,
                      question_gate=self.question_gate if gate is not None and gate > -1.0
                      else None, question_gate_below=self.settings.question_gate_below,
                      item_gate=self.item_gate_now() if item_gate is None else item_gate,
                      min_score=self.settings.min_score if min_score is None else min_score)

    def retrieve(
        self: Asked,
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

    def context(self: Asked, question: str, k: int | None = None,
                regime: str = "conservative") -> str:
        """The block an app puts in its LLM prompt; empty when memory should stay out.

        Regimes (epic_edge.context.REGIMES): conservative (default: stricter gate and floor,
        at most 3 notes, told to ignore them for factual questions), ordinary, aggressive.
        """
        rules = regime_rules(regime)
        knobs = self.settings
        gate, item_gate, floor = rules.thresholds(knobs.gate, self.item_gate_now(),
                                                  knobs.min_score)
        found = self.lookup(question, min(k or knobs.k, rules.max_hits),
                            gate=-1.0 if gate is None else gate, item_gate=item_gate,
                            min_score=-1.0 if floor is None else floor)
        return format_context(found.hits, rules.header)
