"""The keep score: its features, its file, and what it keeps with the real linux-cpu models."""

from __future__ import annotations

import json

import numpy as np
import pytest

from epic_edge.errors import ProfileError
from epic_edge.keep_score import SCALARS, KeepScore, pair_features
from epic_edge.memory import Memory
from epic_edge.profiles import load_profile
from tests.fakes import BagOfWordsEmbedder

FLIGHTS = "I avoid flights longer than three hours."
# a short note the decision alone drops (P(Keep) 0.22); the issue's own "Tokyo 14h, never
# again" sits just under the keep score's threshold with this one preference (P(bears) 0.13)
LONG_HAUL = "Landed after 11 hours from Dubai, legs like lead. Never doing long-haul again"


def unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=-1, keepdims=True)


def test_pair_features_hold_cosine_margin_logit_and_the_vectors_products():
    rng = np.random.default_rng(0)
    item, prefs = unit(rng.normal(size=8)), unit(rng.normal(size=(3, 8)))
    features = pair_features(item, prefs, np.array([0.0, 0.5, 1.0]), words=20)
    cos = prefs @ item
    assert features.shape == (3, len(SCALARS) + 24)
    assert np.allclose(features[:, 0], np.log(20)) and np.allclose(features[:, 1], cos)
    best, second = np.sort(cos)[::-1][:2]
    assert np.allclose(features[:, 2], cos - np.where(cos >= best, second, best))
    assert np.all(np.isfinite(features[:, 3])) and features[1, 3] == 0.0
    assert np.allclose(features[:, 4:12], prefs * item)
    assert np.allclose(features[:, 12:20], np.abs(item - prefs))
    assert np.allclose(features[:, 20:], np.tile(item, (3, 1)))  # the item's own vector


def test_one_preference_has_no_margin_to_speak_of():
    features = pair_features(unit(np.ones(4)), unit(np.ones((1, 4))), np.array([0.9]), 3)
    assert features[0, 2] == pytest.approx(1.0)  # its cosine against no rival


def test_the_shipped_keep_score_is_for_minilm_and_round_trips(tmp_path):
    shipped = KeepScore.named("keep-score.json", tmp_path)
    assert shipped is not None and len(shipped.weights) == len(SCALARS) + 3 * 384
    assert 0.0 < shipped.threshold < 0.5 and "personal dev" in shipped.trained_on
    copy = tmp_path / "copy.json"
    copy.write_text(json.dumps(shipped.to_dict()))
    again = KeepScore.load(copy)
    x = np.random.default_rng(1).normal(size=(5, len(shipped.weights)))
    assert np.allclose(again.probabilities(x), shipped.probabilities(x), atol=1e-5)
    assert KeepScore.named(None, tmp_path) is None
    with pytest.raises(ProfileError, match="unreadable"):
        KeepScore.named("missing.json", tmp_path)


def test_for_item_scores_the_candidates_only_with_margins_over_every_preference():
    rng = np.random.default_rng(2)
    score = KeepScore(rng.normal(size=len(SCALARS) + 12), 0.1, 1.0, 0.0, 0.3)
    item, prefs = unit(rng.normal(size=4)), unit(rng.normal(size=(3, 4)))
    rescore = score.for_item(item, prefs, [2, 0], words=7)
    full = pair_features(item, prefs, np.array([0.8, 0.5, 0.6]), 7)
    assert np.allclose(rescore(np.array([0.6, 0.8])), score.probabilities(full[[2, 0]]))


def test_every_profile_names_the_shipped_keep_score():
    for name in ("linux-cpu", "jetson-orin-nano", "macbook-m4", "galaxy-z-flip6"):
        assert load_profile(name).verifier["keep_score"] == "keep-score.json"


def test_the_keep_score_keeps_the_short_note_the_decision_alone_drops(tmp_path,
                                                                       reference_models):
    with Memory.open(tmp_path / "m.epic", model_dir=reference_models) as memory:
        assert memory.verifier.keep_score is not None
        memory.add_preferences([FLIGHTS])
        kept = memory.remember(LONG_HAUL)
        assert kept.kept and "P(bears)" in kept.items[0].reason
        decision = memory.verifier.scores(LONG_HAUL, memory.preferences())[0]
        assert decision < memory.verifier.floor  # the decision alone would drop it
        # filed below every keep of the decision's own: the budget evicts it first
        assert kept.items[0].p_keep < memory.verifier.floor
        assert not memory.remember("The quarterly tax return is due on 31 January.").kept
        # a discard names the levels the profile sets, not the internal rescue level
        photos = memory.explain("Sam's holiday photos from Bali look amazing")
        assert not photos.would_keep
        assert "< floor 0.500 and P(bears)=" in photos.why and "keep score threshold" in photos.why


def test_another_embedder_turns_the_keep_score_off(tmp_path, reference_models):
    with Memory.open(tmp_path / "m.epic", model_dir=reference_models,
                     embedder=BagOfWordsEmbedder(), tau=0.2) as memory:
        assert memory.verifier.keep_score is None


def test_the_lab_reproduces_the_shipped_keep_score(tmp_path, reference_models, capsys, same_fit):
    pytest.importorskip("epic_edge_lab")
    from epic_edge_lab.cli.train_keep_score import DEFAULT_OUT, main

    assert main(["--out", str(tmp_path / "k.json"), "--models", str(reference_models),
                 "--personas", "11-20,31-40,61-70,81-90"]) == 0  # the writers the embedder
    # was not tuned on (keep-score.json)
    same_fit(tmp_path / "k.json", DEFAULT_OUT)
    report = json.loads(capsys.readouterr().out.split("written")[0])
    assert report["pair_auc_cross_fitted"] > report["pair_auc_cosine"]  # the bar


def test_a_replayed_discard_goes_to_the_real_verifier_when_a_keep_score_may_rescue_it():
    pytest.importorskip("epic_edge_lab")
    from epic_edge.types import Preference, Verdict
    from epic_edge_lab.replay import ReplayVerifier

    class Real:
        keep_score, rescue_below, calls = object(), 0.5, []

        def verify(self, item, candidates, rescore=None):
            self.calls.append(rescore)
            return Verdict(True, [candidates[0].id], {candidates[0].id: "x"}, confidence=0.1)

    real = Real()
    prefs = [Preference(7, "p")]
    replay = ReplayVerifier({("kept", ("p",)): Verdict(True, [0], {0: "i"}, confidence=0.9),
                             ("dropped", ("p",)): Verdict.discard("no", confidence=0.8)},
                            fallback=lambda: real)
    assert replay.keep_score is real.keep_score
    assert replay.verify("kept", prefs, rescore=len).confidence == 0.9 and replay.hits == 1
    assert replay.verify("dropped", prefs, rescore=len).keep and real.calls == [len]
    assert not replay.verify("dropped", prefs).keep  # no keep score in play: replayed


def test_a_replayed_keep_under_the_threshold_goes_to_the_real_verifier_when_it_may_file_twice():
    """Under the threshold the rescue lowers the cut a second preference must pass, so a
    keep there with several candidates is filed by the real verifier (the Ray build's
    replays must file as the runtime does)."""
    pytest.importorskip("epic_edge_lab")
    from epic_edge.types import Preference, Verdict
    from epic_edge_lab.replay import ReplayVerifier

    class Real:
        keep_score, rescue_below, threshold = object(), 0.5, 0.7

        def __init__(self, max_preferences_per_item: int) -> None:
            self.max_preferences_per_item, self.calls = max_preferences_per_item, []

        def verify(self, item, candidates, rescore=None):
            self.calls.append(item)
            return Verdict(True, [c.id for c in candidates], {c.id: "x" for c in candidates},
                           confidence=0.6)

    prefs = [Preference(7, "p"), Preference(8, "q")]
    judged = {("floor", ("p", "q")): Verdict(True, [0], {0: "i"}, confidence=0.6),
              ("sure", ("p", "q")): Verdict(True, [0], {0: "i"}, confidence=0.9),
              ("alone", ("p",)): Verdict(True, [0], {0: "i"}, confidence=0.6)}
    for most, asked in ((2, ["floor"]), (1, [])):
        real = Real(most)
        replay = ReplayVerifier(judged, fallback=lambda real=real: real)
        filed = {item: replay.verify(item, prefs[:len(key)], rescore=len).preference_ids
                 for (item, key) in judged}
        assert real.calls == asked and replay.misses == len(asked)
        assert filed["floor"] == ([7, 8] if most == 2 else [7])
        assert filed["sure"] == [7] and filed["alone"] == [7]


def test_explain_says_what_ingest_does_with_the_keep_score(tmp_path, reference_models):
    with Memory.open(tmp_path / "m.epic", model_dir=reference_models) as memory:
        memory.add_preferences([FLIGHTS])
        explained = memory.explain(LONG_HAUL)
        assert explained.would_keep and "P(bears)" in explained.why


@pytest.mark.parametrize("recall", ["0", "1", "1.5"])
def test_train_keep_score_refuses_a_recall_outside_0_1_before_any_work(tmp_path, recall):
    pytest.importorskip("epic_edge_lab")
    from epic_edge.errors import InvalidInputError
    from epic_edge_lab.cli.train_keep_score import main

    with pytest.raises(InvalidInputError, match="--recall"):
        main(["--recall", recall, "--out", str(tmp_path / "k.json")])
    assert not (tmp_path / "k.json").exists()


def test_a_bad_persona_range_is_a_usage_error_naming_the_form(tmp_path, capsys):
    pytest.importorskip("epic_edge_lab")
    from epic_edge_lab.cli.train_keep_score import main

    with pytest.raises(SystemExit) as stop:
        main(["--personas", "40-1", "--out", str(tmp_path / "k.json")])
    assert stop.value.code == 2 and not (tmp_path / "k.json").exists()
    assert "want persona numbers as FIRST-LAST[,FIRST-LAST...] (e.g. 1-40 or 11-20,31-40), got " \
        "'40-1'" in capsys.readouterr().err
