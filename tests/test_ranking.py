"""The ranking's evidence: fusing boosts into vector scores, each entry's confidence lifted by
how much the question leans to the preference it is filed under, and short items lowered."""

from __future__ import annotations

import warnings
from dataclasses import asdict

import numpy as np
import pytest

from epic_edge.memory import Memory
from epic_edge.profiles import list_profiles, load_profile
from epic_edge.ranking import BREVITY_WORDS, fuse, shortfall, weighted
from epic_edge.settings import MemorySettings
from epic_edge.stages import Steering, normalize_rows
from epic_edge.types import Preference, Verdict
from fakes import BagOfWordsEmbedder, KeywordVerifier


def test_fuse_adds_every_boost_and_keeps_vector_scores():
    scores, ids = np.array([0.50, 0.48, 0.40, 0.0]), np.array([7, 3, 9, -1])
    lexical = (np.array([3, 7, 9]), np.array([0.1, 0.0, 0.05]))
    ranked, top_scores, top_ids = fuse(scores, ids, [lexical], 2)
    assert top_ids.tolist() == [3, 7] and top_scores.tolist() == [0.48, 0.50]
    assert ranked.tolist() == pytest.approx([0.58, 0.50])  # what they were ranked by, falling
    assert fuse(scores, ids, [], 9)[2].tolist() == [7, 3, 9]  # no -1
    # an entry a boost does not list gets nothing from it; boosts add up
    assert fuse(scores, ids, [(np.array([5]), np.array([1.0]))], 3)[2].tolist() == [7, 3, 9]
    second = (np.array([9]), np.array([0.06]))
    assert fuse(scores, ids, [lexical, second], 3)[2].tolist() == [3, 9, 7]  # 9: 0.51 > 0.50


def test_steering_weights_are_the_mix_it_steers_toward():
    vectors = normalize_rows(np.array([[1.0, 0.0, 0.0], [0.8, 0.6, 0.0], [0.0, 0.0, 1.0]]))
    prefs = [Preference(i, f"p{i}") for i in range(3)]
    q = normalize_rows(np.array([0.9, 0.3, 0.1]))
    hedged = Steering(prefs, vectors, hedge=0.05)
    weights = hedged.weights(q)
    assert weights.sum() == pytest.approx(1.0) and weights.argmax() == 1 and weights[2] < 1e-6
    mixed = normalize_rows(q + weights @ vectors)
    assert np.allclose(hedged.steer(q)[0], mixed, atol=1e-6)
    assert Steering(prefs, vectors).weights(q).tolist() == [0.0, 1.0, 0.0]  # argmax: one-hot
    assert Steering([], np.empty((0, 3))).weights(q).shape == (0,)


class ConfidentVerifier(KeywordVerifier):
    """The keyword verifier, with a chosen confidence per item."""

    def __init__(self, confidence: dict[str, float]) -> None:
        super().__init__()
        self.confidence = confidence

    def verify(self, item, candidates):
        verdict = super().verify(item, candidates)
        return Verdict(verdict.keep, verdict.preference_ids, verdict.instructions,
                       verdict.reason, self.confidence.get(item, verdict.confidence),
                       verdict.llm_calls)


VEGAN, STEAK = "vegan plant food", "steakhouse dinners"
SURE = "A vegan bistro serves plant dishes"
UNSURE = "A vegan plant cookbook, the best plant cookbook"
OTHER = "A steakhouse serves dinners"


@pytest.fixture
def confident_memory(tmp_path):
    embedder = BagOfWordsEmbedder()
    verifier = ConfidentVerifier({SURE: 0.95, UNSURE: 0.55, OTHER: 0.99})
    with Memory.open(tmp_path / "c.epic", embedder=embedder, verifier=verifier, tau=0.2) as memory:
        memory.add_preferences([VEGAN, STEAK])
        memory.ingest([SURE, UNSURE, OTHER])
        yield memory


def test_confidence_lifts_the_surer_entry_of_the_question_s_preference(confident_memory):
    question = "Which vegan plant cookbook is best?"
    by_vector = [h.item_text for h in confident_memory.retrieve(question, k=3, gate=-1.0)]
    assert by_vector[0] == UNSURE
    confident_memory.settings = confident_memory.settings.replace(confidence=1.0)
    hits = confident_memory.retrieve(question, k=3, gate=-1.0)
    # the surer vegan entry now leads; the surest entry of all is filed under the other
    # preference, which the question does not lean to, so it is not lifted
    assert [h.item_text for h in hits] == [SURE, UNSURE, OTHER]
    assert [h.confidence for h in hits[:2]] == pytest.approx([0.95, 0.55])
    # unsteered lookups rank by the question alone: no preference, no lift
    assert [h.item_text for h in confident_memory.retrieve(
        question, k=3, steer=False, gate=-1.0)][0] == UNSURE


def test_confidence_evidence_follows_the_memory_as_it_changes(confident_memory):
    evidence = confident_memory.confidence_evidence
    prefs = {p.text: p.id for p in confident_memory.preferences()}
    ids, lifted = evidence.scores(confident_memory.store, confident_memory.entry_index,
                                  np.array([prefs[VEGAN]]), np.array([1.0]))
    assert ids.tolist() == confident_memory.entry_index.ids.tolist()
    assert sorted(lifted.tolist()) == pytest.approx([0.0, 0.55, 0.95])
    confident_memory.remove_preference(VEGAN)
    ids, lifted = evidence.scores(confident_memory.store, confident_memory.entry_index,
                                  np.array([prefs[STEAK]]), np.array([0.5]))
    assert ids.tolist() == confident_memory.entry_index.ids.tolist()
    assert lifted.tolist() == pytest.approx([0.495])


def test_shortfall_and_the_shared_formula():
    assert shortfall(np.array([0, 15, BREVITY_WORDS, 90])).tolist() == [1.0, 0.5, 0.0, 0.0]
    setting = {"lexical": 0.1, "confidence": None, "brevity": 0.3}  # None: off
    assert weighted(setting, bm25=1.0, lifted=5.0, short=0.5) == pytest.approx(0.1 - 0.15)
    assert weighted({}, bm25=1.0, lifted=1.0, short=1.0) == 0.0


SHORT = "vegan plant food"  # the preference's own words: the closest vector of all
LONG = ("A vegan bistro in the old town serves plant food from local farms: lentil stews, "
        "roasted squash, tofu curries and oat milk desserts, with a tasting menu that changes "
        "every season and a quiet garden for dinner on warm summer evenings.")


def test_brevity_lowers_a_short_item_and_follows_the_memory(tmp_path):
    embedder = BagOfWordsEmbedder()
    with Memory.open(tmp_path / "b.epic", embedder=embedder, verifier=KeywordVerifier(),
                     tau=0.2) as memory:
        memory.add_preferences([VEGAN])
        memory.ingest([SHORT, LONG])
        question = "vegan plant food for dinner?"
        assert [h.item_text for h in memory.retrieve(question, k=2, gate=-1.0)] == [SHORT, LONG]
        memory.settings = memory.settings.replace(brevity=1.0)
        hits = memory.retrieve(question, k=2, gate=-1.0)
        assert [h.item_text for h in hits] == [LONG, SHORT]
        # each hit shows the score it was ranked by (falling) and keeps its vector score
        assert hits[0].score > hits[1].score and hits[1].similarity > hits[0].similarity
        assert hits[0].score == pytest.approx(hits[0].similarity - 1.0 * shortfall(
            np.array([len(LONG.split())]))[0])
        ids, short = memory.brevity_evidence.scores(memory.store, memory.entry_index)
        assert ids.tolist() == memory.entry_index.ids.tolist()
        assert sorted(short.tolist()) == pytest.approx([0.0, 1 - 3 / BREVITY_WORDS])
        memory.ingest(["vegan plant food stalls"])  # the evidence re-reads the new entry
        assert len(memory.brevity_evidence.scores(memory.store, memory.entry_index)[0]) == 3


def test_every_shipped_profile_ranks_as_the_reference_does():
    ranking = ("hedge", "steer_weight", "lexical", "confidence", "brevity")
    reference = asdict(MemorySettings.from_profile(load_profile("linux-cpu")))
    assert reference["brevity"]  # the chosen default is on
    for name in list_profiles():
        settings = asdict(MemorySettings.from_profile(load_profile(name)))
        assert {key: settings[key] for key in ranking} == {key: reference[key] for key in ranking}


def test_any_instance_of_the_calibrated_model_keeps_the_profiles_ranking(tmp_path, monkeypatch):
    from epic_edge import registry

    shipped = load_profile("linux-cpu")
    model = shipped.retrieval["calibrated_for"]
    # the app's own instance of the profile's model (another precision): the ranking holds
    same = BagOfWordsEmbedder(dim=384, name=model)
    with Memory.open(tmp_path / "same.epic", shipped, embedder=same) as memory:
        knobs = memory.settings
        assert (knobs.hedge, knobs.lexical, knobs.brevity) == (
            shipped.retrieval["hedge"], shipped.retrieval["lexical"], shipped.retrieval["brevity"])
        assert knobs.gate == shipped.retrieval["gate"] and memory.background is not None
    # another model with its own tau: the paper's ranking, no gate, nothing to warn of
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        memory = Memory.open(tmp_path / "other.epic", shipped, embedder=BagOfWordsEmbedder(),
                             tau=0.2)
    with memory:
        knobs = memory.settings
        assert (knobs.hedge, knobs.lexical, knobs.gate, memory.background) == (
            None, None, None, None)
    # another model with the profile's tau (its own embedder or the app's): off, and said so
    create = registry.create
    monkeypatch.setattr(registry, "create", lambda kind, config, *a, **kw:
                        BagOfWordsEmbedder() if kind == "embedder" else
                        create(kind, config, *a, **kw))
    with pytest.warns(RuntimeWarning, match="its tau 0.24 may not suit this embedder"):
        memory = Memory.open(tmp_path / "own.epic", shipped)
    with memory:
        assert memory.settings.lexical is None


def test_an_item_filed_under_two_preferences_is_one_hit_at_its_best_entry(tmp_path):
    with Memory.open(tmp_path / "two.epic", embedder=BagOfWordsEmbedder(),
                     verifier=KeywordVerifier(), tau=0.0) as memory:
        memory.add_preferences(["vegan food", "cheap dinner"])
        memory.ingest(["vegan food and cheap dinner at Lotus", "vegan food stall opens"])
        assert memory.store.count("entries") == 3  # the first item is filed under both
        hits = memory.retrieve("vegan food cheap dinner", k=2, gate=-1.0)
        assert [h.item_text for h in hits] == ["vegan food and cheap dinner at Lotus",
                                               "vegan food stall opens"]
        assert len({h.item_id for h in memory.retrieve("vegan food", k=5, gate=-1.0)}) == 2
