"""The question gate: its file (and the keep score's, the same shape), the lookup rule, and what
it withholds with the real models."""

from __future__ import annotations

import json

import numpy as np
import pytest

from epic_edge.errors import ProfileError
from epic_edge.keep_score import KeepScore
from epic_edge.memory import Memory
from epic_edge.profiles import load_profile
from epic_edge.question_gate import QuestionGate
from epic_edge.retrieval import uses_memory
from tests.fakes import BagOfWordsEmbedder

PREFERENCES = ["After a night shift I sleep until 2pm, so don't book anything before then.",
               "I'm lactose intolerant, so no cow's milk, cream or regular cheese.",
               "I don't drive; I get everywhere by bus, train or lifts."]
STREAM = ["Dentist: Wednesday 11 March, 3:40pm, Dr Okafor, Park Road surgery.",
          "Mum: wifi at ours is now Badger2026! x",
          "Nights Mon-Wed this week, off Thursday.",
          "Tried the oat flat white at Bean There, actually lovely.",
          "Bus 42 stops running at 23:10 on Sundays now."]
LOOKUPS = ["When's my dentist appointment?", "What's the wifi password at Mum's?"]
REQUESTS = ["Suggest somewhere for coffee with Becky on Thursday.",
            "How do I get to Nana's party and back on Sunday?"]


@pytest.mark.parametrize("kind", [QuestionGate, KeepScore])
@pytest.mark.parametrize("body", ["not json", '{"weights": [1, 2]}',
                                  '{"weights": [1], "bias": 0, "slope": 1, "offset": 0, '
                                  '"threshold": 0}',
                                  '{"weights": [[1]], "bias": 0, "slope": 1, "offset": 0, '
                                  '"threshold": 0.5}'])
def test_a_bad_calibrated_score_file_is_a_one_line_profile_error(tmp_path, body, kind):
    path = tmp_path / "score.json"
    path.write_text(body)
    with pytest.raises(ProfileError, match=kind.WHAT) as caught:
        kind.load(path)
    assert "\n" not in str(caught.value)


def test_the_shipped_question_gate_is_for_minilm_and_round_trips(tmp_path):
    shipped = QuestionGate.named("question-gate.json", tmp_path)
    assert shipped is not None and shipped.buckets > 0
    assert len(shipped.weights) == 384 + shipped.buckets
    assert 0.0 < shipped.threshold < 1.0 and "written gate-set" in shipped.trained_on
    copy = tmp_path / "copy.json"
    copy.write_text(json.dumps(shipped.to_dict()))
    q = np.random.default_rng(0).normal(size=(4, 384))
    texts = ["Remind me to call Mum", "Book dinner for Sam", "", "Où est la gare ?"]
    again = QuestionGate.load(copy)
    assert (again.buckets, again.word_scale) == (shipped.buckets, shipped.word_scale)
    assert np.allclose(again.probability(q, texts), shipped.probability(q, texts), atol=1e-5)
    assert np.isclose(shipped.probability(q[0], texts[0]), shipped.probability(q, texts)[0])
    assert QuestionGate.named(None, tmp_path) is None
    with pytest.raises(ProfileError, match="unreadable"):
        QuestionGate.named("missing.json", tmp_path)
    with pytest.raises(ProfileError, match=f"expects {384 + shipped.buckets} features"):
        shipped.probability(np.ones(8), "eight dimensions")


def test_word_features_hash_the_opening_and_every_word_in_any_script():
    from epic_edge.question_gate import gate_features, word_features

    remind = word_features("Remind me to call Mum!", 64)
    assert remind.sum() == pytest.approx(8 / np.sqrt(8))  # 3 openings and 5 words
    assert np.allclose(remind, word_features("remind ME to call mum", 64))  # case, punctuation
    assert word_features("", 64).sum() == 0.0
    assert word_features("Où est la gare", 64).sum() > 0  # letters of any script count
    rows = gate_features(np.ones((2, 3)), ["a b", "c"], 16, 2.0)
    assert rows.shape == (2, 19) and np.allclose(rows[:, :3], 1.0)
    assert gate_features(np.ones(3), "a", 0, 2.0).shape == (1, 3)  # no word features
    with pytest.raises(ValueError, match="2 question vectors but 1 texts"):
        gate_features(np.ones((2, 3)), ["a"], 16, 2.0)


def test_the_rule_withholds_at_the_threshold_and_never_for_a_missing_reading():
    assert not uses_memory(0.9, 0.9, 0.1, 0.2, 0.7, 0.7)  # withheld at >= threshold
    assert uses_memory(0.9, 0.9, 0.1, 0.2, 0.69, 0.7)
    assert uses_memory(0.9, 0.9, 0.1, 0.2, None, 0.7) and uses_memory(0.9, 0.9, 0.1, 0.2, 0.9)
    assert not uses_memory(0.05, 0.1, 0.1, 0.2, 0.1, 0.7)  # the other evidence still counts
    rows = uses_memory(np.array([0.9, 0.9]), np.array([0.0, 0.0]), 0.1, 0.2,
                       np.array([np.nan, 0.95]), 0.7)
    assert rows.tolist() == [True, False]
    assert uses_memory(0.0, 0.0, None, None, 0.99, 0.7)  # no gate at all: always
    assert uses_memory(0.45, 0.0, 0.1, 0.2, 0.99, 0.7, 0.38)  # close to a preference: served
    assert not uses_memory(0.35, 0.0, 0.1, 0.2, 0.99, 0.7, 0.38)


def test_every_profile_names_the_shipped_question_gate():
    for name in ("linux-cpu", "jetson-orin-nano", "macbook-m4", "galaxy-z-flip6"):
        retrieval = load_profile(name).retrieval
        assert retrieval["question_gate"] == "question-gate.json"
        assert retrieval["question_gate_below"] == 0.6


@pytest.fixture
def personal_memory(tmp_path, reference_models):
    memory = Memory.open(tmp_path / "m.epic", model_dir=reference_models)
    memory.add_preferences(PREFERENCES)
    memory.ingest(STREAM)
    yield memory
    memory.close()


def test_a_persons_own_lookups_get_no_memory_and_their_requests_do(personal_memory):
    for question in LOOKUPS:
        found = personal_memory.lookup(question)
        assert not found.used_memory and found.hits == []
        assert "no preference bears on" in found.reason
        assert personal_memory.context(question) == ""
        assert personal_memory.lookup(question, gate=-1.0).hits  # the switch turns it off
        assert personal_memory.context(question, regime="aggressive") != ""
    for question in REQUESTS:
        assert personal_memory.lookup(question).used_memory, question


def test_a_question_close_to_a_preference_keeps_its_memory_whatever_its_form(personal_memory):
    question = "How do I make cheese sauce without milk?"  # a how-to, 0.63 from the lactose one
    vector = personal_memory.embedder.embed([question])[0]
    gate = personal_memory.question_gate
    assert gate.probability(vector, question) >= gate.threshold  # the gate alone: a how-to
    found = personal_memory.lookup(question)
    assert found.used_memory and found.similarity >= personal_memory.settings.question_gate_below
    personal_memory.settings = personal_memory.settings.replace(question_gate_below=None)
    assert not personal_memory.lookup(question).used_memory  # everywhere: withheld


def test_without_it_the_stream_lets_the_lookups_in(personal_memory):
    """What the gate is for: the older evidence passes these (their answers are stored)."""
    personal_memory.settings = personal_memory.settings.replace(question_gate=None)
    assert any(personal_memory.lookup(q).used_memory for q in LOOKUPS)


def test_a_profile_names_its_question_gate_relative_to_the_memorys_model_folder(
        tmp_path, reference_models):
    models = tmp_path / "models"
    models.mkdir()
    for entry in reference_models.iterdir():
        (models / entry.name).symlink_to(entry)
    own = QuestionGate.named("question-gate.json").to_dict() | {"threshold": 0.99}
    (models / "gates").mkdir()
    (models / "gates" / "mine.json").write_text(json.dumps(own))
    profile = tmp_path / "mine.toml"
    shipped = load_profile("linux-cpu").path.read_text(encoding="utf-8")
    profile.write_text(shipped.replace('question_gate = "question-gate.json"',
                                       'question_gate = "gates/mine.json"'))
    with Memory.open(tmp_path / "m.epic", profile, model_dir=models) as memory:
        assert memory.question_gate.threshold == 0.99


def test_another_embedder_turns_the_question_gate_off(tmp_path, reference_models):
    with Memory.open(tmp_path / "m.epic", model_dir=reference_models,
                     embedder=BagOfWordsEmbedder(), tau=0.2) as memory:
        assert memory.question_gate is None and memory.settings.question_gate is None


def test_the_lab_reproduces_the_shipped_question_gate(tmp_path, reference_models, capsys, same_fit):
    pytest.importorskip("epic_edge_lab")
    from epic_edge_lab.cli.train_question_gate import DEFAULT_OUT, main

    assert main(["--out", str(tmp_path / "g.json"), "--models", str(reference_models),
                 "--personas", "11-20,31-40,61-70,81-90"]) == 0  # as shipped
    same_fit(tmp_path / "g.json", DEFAULT_OUT)
    report = json.loads(capsys.readouterr().out.split("\nwritten ")[0])
    held = report["cross_fitted"]
    assert held["personal kinds"]["no_memory_preference"] <= 0.05
    assert held["judged"]["no_memory_preference"] <= 0.05


@pytest.mark.parametrize("served", ["0", "1", "2"])
def test_train_question_gate_refuses_a_share_outside_0_1_before_any_work(tmp_path, served):
    pytest.importorskip("epic_edge_lab")
    from epic_edge.errors import InvalidInputError
    from epic_edge_lab.cli.train_question_gate import main

    with pytest.raises(InvalidInputError, match="--served"):
        main(["--served", served, "--out", str(tmp_path / "g.json")])
    assert not (tmp_path / "g.json").exists()


def test_a_gate_set_that_names_a_preference_its_persona_lacks_is_refused(tmp_path):
    pytest.importorskip("epic_edge_lab")
    from epic_edge.errors import InvalidInputError
    from epic_edge_lab.gate_training import gate_set

    path = tmp_path / "set.jsonl"
    path.write_text(json.dumps({"persona": "g1", "preferences": [{"id": "g1.a", "text": "x"}],
                                "questions": [{"id": "g1.q1", "text": "y",
                                               "prefs": ["g1.z"]}]}) + "\n")
    with pytest.raises(InvalidInputError, match="g1.q1"):
        gate_set(path)

