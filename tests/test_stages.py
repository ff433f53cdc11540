"""The three EPIC stages on hand-made vectors: threshold, verification, steering."""

from __future__ import annotations

import numpy as np
import pytest

from epic_edge.stages import Candidate, Steering, coarse_filter, fine_verify, normalize_rows
from epic_edge.types import Preference, Verdict

PREFS = [Preference(1, "a"), Preference(2, "b"), Preference(3, "c")]
P_VECS = np.eye(3, 4, dtype=np.float32)


def test_coarse_filter_keeps_scores_at_or_above_tau_best_first():
    items = normalize_rows(np.array([[0.3, 0.9, 0, 0], [0, 0, 0, 1], [0.5, 0.5, 0.5, 0]]))
    result = coarse_filter(items, PREFS, P_VECS, tau=float(items[0, 0]))
    assert [c.preference.id for c in result[0]] == [2, 1]  # cosine == tau passes
    assert result[1] == []  # orthogonal item: dropped, no LLM call
    assert [c.preference.id for c in result[2]] == [1, 2, 3]
    assert all(c.score >= float(items[0, 0]) for row in result for c in row)


def test_coarse_filter_just_below_tau_drops():
    items = normalize_rows(np.array([[0.3, 0.9, 0, 0]]))
    result = coarse_filter(items, PREFS, P_VECS, tau=float(items[0, 1]) + 1e-6)
    assert result == [[]]


def test_coarse_filter_without_preferences_drops_everything():
    assert coarse_filter(np.ones((2, 4), np.float32), [], np.empty((0, 4)), 0.0) == [[], []]


class _Scripted:
    def __init__(self, verdict):
        self.verdict = verdict
        self.calls = 0

    def verify(self, item, candidates):
        self.calls += 1
        return self.verdict


def test_fine_verify_refuses_items_without_candidates():
    with pytest.raises(ValueError):
        fine_verify(_Scripted(Verdict(True)), "x", [])


def test_fine_verify_drops_preferences_that_were_not_candidates_or_lack_instructions():
    verdict = Verdict(True, [1, 2, 9], {1: "use it", 2: "  ", 9: "sneaky"}, "", 0.7, 3)
    out = fine_verify(_Scripted(verdict), "x", [Candidate(PREFS[0], 0.5), Candidate(PREFS[1], .4)])
    assert out.keep and out.preference_ids == [1] and out.instructions == {1: "use it"}
    assert out.llm_calls == 3 and out.confidence == pytest.approx(0.7)


def test_fine_verify_keep_without_usable_preference_becomes_discard():
    out = fine_verify(_Scripted(Verdict(True, [9], {9: "x"}, "", 0.8, 1)), "x",
                      [Candidate(PREFS[0], 0.5)])
    assert not out.keep and out.llm_calls == 1 and out.reason


def test_steering_equation_and_routing():
    steering = Steering(PREFS, P_VECS)
    q = normalize_rows(np.array([0.2, 0.8, 0.0, 0.5]))
    steered, pref, sim = steering.steer(q)
    assert pref == PREFS[1] and sim == pytest.approx(q[1])
    expected = (q + P_VECS[1]) / np.linalg.norm(q + P_VECS[1])
    np.testing.assert_allclose(steered, expected, rtol=1e-6)
    assert np.linalg.norm(steered) == pytest.approx(1.0)
    assert steering.route(q) == (PREFS[1], pytest.approx(q[1]))


def test_steering_without_preferences_returns_query_unchanged():
    q = normalize_rows(np.array([1.0, 2.0, 0.0, 0.0]))
    steered, pref, _ = Steering([], np.empty((0, 4))).steer(q)
    assert pref is None
    np.testing.assert_array_equal(steered, q)


@pytest.mark.parametrize("m", [3, 200])  # the list path (few preferences) and numpy's argmax
def test_steering_matches_the_equation_for_any_number_of_preferences(m):
    rng = np.random.default_rng(m)
    vectors = normalize_rows(rng.normal(size=(m, 16)))
    prefs = [Preference(i, f"p{i}") for i in range(m)]
    steering = Steering(prefs, vectors)
    for q in normalize_rows(rng.normal(size=(20, 16))).astype(np.float64):  # float64 in
        sims = vectors @ q
        best = int(np.argmax(sims))
        steered, pref, sim = steering.steer(q)
        assert pref == prefs[best] and sim == pytest.approx(sims[best], abs=1e-6)
        expected = (q + vectors[best]) / np.linalg.norm(q + vectors[best])
        np.testing.assert_allclose(steered, expected, atol=1e-6)
        assert steered.dtype == np.float32


def test_steering_ties_go_to_the_first_preference():
    vectors = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    steering = Steering([Preference(i, str(i)) for i in range(3)], vectors)
    assert steering.route(np.array([1.0, 0.0], dtype=np.float32))[0].id == 0


def test_hedged_steering_mixes_preferences_by_softmax():
    prefs = [Preference(1, "a"), Preference(2, "b"), Preference(3, "c")]
    vectors = np.eye(3, 4, dtype=np.float32)
    q = np.array([0.6, 0.55, 0.0, 0.58], np.float32)
    q /= np.linalg.norm(q)
    steered, best, sim = Steering(prefs, vectors, hedge=0.05).steer(q)
    w = np.exp((vectors @ q - (vectors @ q).max()) / 0.05)
    expected = q + (w / w.sum()) @ vectors
    assert best == prefs[0] and sim == pytest.approx(float(q[0]))
    assert np.allclose(steered, expected / np.linalg.norm(expected), atol=1e-6)
    assert steered[1] > 0.3  # the close second preference is not ignored
    sharp, _, _ = Steering(prefs, vectors, hedge=1e-4).steer(q)
    argmax, _, _ = Steering(prefs, vectors).steer(q)
    assert np.allclose(sharp, argmax, atol=1e-5)


@pytest.mark.parametrize("hedge", [None, 0.05])
def test_steering_weight_scales_the_preference_pull(hedge):
    prefs = [Preference(1, "a"), Preference(2, "b")]
    vectors = np.eye(2, 3, dtype=np.float32)
    q = np.array([0.6, 0.2, 0.77], np.float32)
    q /= np.linalg.norm(q)
    full, _, _ = Steering(prefs, vectors, hedge=hedge).steer(q)
    half, best, _ = Steering(prefs, vectors, hedge=hedge, weight=0.5).steer(q)
    if hedge is None:
        pull = vectors[0]
    else:
        softmax = np.exp((vectors @ q - (vectors @ q).max()) / hedge)
        pull = (softmax / softmax.sum()) @ vectors
    expected = q + 0.5 * pull
    assert best == prefs[0]
    assert np.allclose(half, expected / np.linalg.norm(expected), atol=1e-6)
    assert float(half @ q) > float(full @ q)  # a lighter pull stays closer to the question
    assert np.allclose(Steering(prefs, vectors, hedge=hedge, weight=0.0).steer(q)[0], q,
                       atol=1e-6)


def test_steering_weight_must_not_be_negative():
    with pytest.raises(ValueError, match="weight"):
        Steering([Preference(1, "a")], np.eye(1, 3, dtype=np.float32), weight=-0.1)


def test_steering_by_text_embeds_the_question_with_the_preferences_it_leans_to():
    prefs = [Preference(1, "vegan"), Preference(2, "no spice"), Preference(3, "trains")]
    vectors = np.eye(3, 4, dtype=np.float32)
    q = np.array([0.6, 0.55, 0.0, 0.58], np.float32)
    q /= np.linalg.norm(q)
    asked: list[list[str]] = []
    rows = {"dinner? vegan": [1.0, 0.0, 0.0, 0.0], "dinner? no spice": [0.0, 0.0, 0.0, 1.0]}

    def embed(texts):
        asked.append(list(texts))
        return np.array([rows[t] for t in texts], np.float32)

    hedged = Steering(prefs, vectors, hedge=0.05, by="text")
    w = hedged.weights(q)
    assert w[1] >= 0.1 and w[2] < 0.1  # two preferences lean in, the third does not
    found = hedged.search_vector(q, "dinner?", embed)
    assert asked == [["dinner? vegan", "dinner? no spice"]]
    expected = w[0] * np.array(rows["dinner? vegan"]) + w[1] * np.array(rows["dinner? no spice"])
    assert np.allclose(found, expected / np.linalg.norm(expected), atol=1e-6)
    # argmax steering leans to one preference only: one embedding
    asked.clear()
    one = Steering(prefs, vectors, by="text").search_vector(q, "dinner?", embed)
    assert asked == [["dinner? vegan"]] and np.allclose(one, rows["dinner? vegan"])
    # by vector (the paper's): the steered vector, no embedding
    asked.clear()
    by_vector = Steering(prefs, vectors, hedge=0.05)
    assert np.allclose(by_vector.search_vector(q, "dinner?", embed), by_vector.steer(q)[0])
    assert asked == []
    with pytest.raises(ValueError, match="sideways"):
        Steering(prefs, vectors, by="sideways")


def test_eased_steering_backs_off_as_the_raw_question_finds_its_entries():
    from epic_edge.retrieval import eased_weight

    assert eased_weight(1.0, 0.2, 0.3, 0.5) == 1.0  # weak raw hits: the full pull
    assert eased_weight(1.0, 0.4, 0.3, 0.5) == pytest.approx(0.5)
    assert eased_weight(1.0, 0.5, 0.3, 0.5) == 0.0  # strong raw hits: none
    assert eased_weight(0.8, 0.44, None, 0.45) == 0.8 and eased_weight(0.8, 0.45, None, 0.45) == 0


def test_steering_with_a_weight_of_zero_leaves_the_question_as_it_is():
    steering = Steering([Preference(1, "a")], np.array([[0.0, 1.0]], np.float32))
    q = np.array([1.0, 0.0], np.float32)
    assert np.allclose(steering.steer(q, 0.0)[0], q)
    assert not np.allclose(steering.steer(q)[0], q)
