"""The decision module: P(Keep) per candidate -> Verdict, the same rule for every verifier."""

from __future__ import annotations

import pytest

from epic_edge.decision import decide, guard, keep_levels
from epic_edge.errors import ProfileError
from epic_edge.instructions import template_instruction
from epic_edge.types import Preference

A, B, C = Preference(1, "I am vegan"), Preference(2, "I hike"), Preference(3, "I like jazz")
ITEM = "A vegan cafe at the trailhead plays jazz on Sundays."


def test_guards_need_no_scoring():
    assert guard(ITEM, []).reason == "no candidate preferences"
    assert guard("  ", [A]).reason == "empty item"
    assert guard(ITEM, [A]) is None


def test_below_threshold_is_discarded_with_three_decimals():
    verdict = decide(ITEM, [A, B], [0.2, 0.41], threshold=0.5, max_preferences=2, llm_calls=1)
    assert not verdict.keep and verdict.reason == "P(Keep)=0.410 < threshold 0.500"
    assert abs(verdict.confidence - 0.59) < 1e-9 and verdict.llm_calls == 1


def test_kept_under_the_best_candidates_at_or_above_threshold_ties_in_filter_order():
    verdict = decide(ITEM, [A, B, C], [0.6, 0.9, 0.6], threshold=0.5, max_preferences=2)
    assert verdict.keep and verdict.preference_ids == [2, 1]
    assert verdict.reason == "P(Keep)=0.900 >= threshold 0.500" and verdict.confidence == 0.9
    below = decide(ITEM, [A, B], [0.9, 0.3], threshold=0.5, max_preferences=2)
    assert below.preference_ids == [1]


def test_a_floor_keeps_what_falls_short_of_the_threshold_and_says_so():
    verdict = decide(ITEM, [A, B], [0.55, 0.3], threshold=0.7, floor=0.5, max_preferences=2)
    assert verdict.keep and verdict.preference_ids == [1] and verdict.confidence == 0.55
    assert verdict.threshold == 0.7  # the budget evicts it before any sure entry
    assert verdict.reason == "P(Keep)=0.550 >= floor 0.500: kept while the memory has room"
    sure = decide(ITEM, [A, B], [0.55, 0.8], threshold=0.7, floor=0.5, max_preferences=2)
    assert sure.preference_ids == [2]  # a sure item is filed under the sure candidates only
    below = decide(ITEM, [A], [0.45], threshold=0.7, floor=0.5, max_preferences=1)
    assert not below.keep and below.reason == ("P(Keep)=0.450 < floor 0.500 (threshold "
                                               "0.700)")
    assert keep_levels(0.7) == (0.7, None) and keep_levels("0.7", 0.5) == (0.7, 0.5)
    assert keep_levels(0.3, 0.5) == (0.3, None)  # a threshold lowered under the floor
    with pytest.raises(ProfileError, match="floor -0.1 is negative"):
        keep_levels(0.7, -0.1)


def test_writer_is_called_for_kept_items_only_and_unusable_text_falls_back():
    calls = []

    def write(item, candidates, kept):  # type: ignore[no-untyped-def]
        calls.append([p.id for p in kept])
        return {1: "Suggest\x00 it  for dinner.", 2: "?!"}, ["note"], len(kept)

    kept = decide(ITEM, [A, B], [0.8, 0.7], threshold=0.5, max_preferences=2, write=write,
                  llm_calls=1)
    assert calls == [[1, 2]] and kept.llm_calls == 3
    assert kept.instructions == {1: "Suggest it for dinner.", 2: template_instruction(ITEM, B)}
    assert kept.reason.endswith("; note")
    decide(ITEM, [A], [0.1], threshold=0.5, max_preferences=1, write=write)
    assert calls == [[1, 2]]  # a discarded item costs no instruction


def test_checked_instructions_template_what_fails_and_propagate_or_fall_back_on_errors():
    import pytest

    from epic_edge.backends.verifier_prompts import INSTRUCTION_PREFILL, checked_instructions

    def generate(pref: Preference) -> str:
        if pref is C:
            raise ConnectionError("server down")
        return " suggest it for dinner." if pref is A else "?"

    texts, notes, calls = checked_instructions(ITEM, [A, B], generate, 400)
    assert texts == {1: f"{INSTRUCTION_PREFILL} suggest it for dinner.",
                     2: template_instruction(ITEM, B)}
    assert calls == 2 and notes == ["template instruction for preference 2 (empty or not words)"]
    with pytest.raises(ConnectionError):
        checked_instructions(ITEM, [C], generate, 400)
    texts, notes, _ = checked_instructions(ITEM, [C], generate, 400, fall_back_on_error=True)
    assert texts == {3: template_instruction(ITEM, C)} and "ConnectionError" in notes[0]
