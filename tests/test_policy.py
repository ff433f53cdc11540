"""Memory policy on real MiniLM embeddings: gate, regimes, compressed vectors, consolidation."""

from __future__ import annotations

import pytest

from epic_edge.datasets import load_sample_corpus, load_sample_persona
from epic_edge.errors import InvalidInputError
from epic_edge.memory import Memory
from epic_edge.profiles import load_profile
from epic_edge.registry import create
from epic_edge.types import Item

FACTUAL = ["What is the boiling point of water at sea level in Celsius?",
           "Who wrote the Declaration of Independence?"]


@pytest.fixture(scope="module")
def profile():
    return load_profile("linux-cpu")


@pytest.fixture(scope="module")
def embedder(profile, reference_models):
    return create("embedder", profile.embedder, reference_models)


def _memory(path, profile, embedder, reference_models, fmt="float32"):
    return Memory.open(path, profile, embedder=embedder, tau=profile.tau, vector_format=fmt,
                       verifier=create("verifier", {"backend": "template"}, reference_models))


@pytest.fixture(scope="module")
def persona_memory(tmp_path_factory, profile, embedder, reference_models):
    memory = _memory(tmp_path_factory.mktemp("p") / "m.epic", profile, embedder,
                     reference_models)
    # the profile's model: its calibration
    assert memory.settings.gate == profile.retrieval["gate"]
    memory.settings = memory.settings.replace(min_score=0.2)
    memory.add_preferences(load_sample_persona()["preferences"])
    memory.ingest(load_sample_corpus()[:120])
    yield memory
    memory.close()


def test_gate_keeps_memory_out_of_factual_questions(persona_memory):
    for question in FACTUAL:
        found = persona_memory.lookup(question)
        assert not found.used_memory and found.hits == []
        assert "no preference bears on" in found.reason  # the question gate, first
        assert persona_memory.context(question) == ""
        # gate and floor off: hits come back
        assert persona_memory.lookup(question, gate=-1.0, min_score=-1.0).hits


def test_without_the_question_gate_the_preference_gate_still_keeps_them_out(persona_memory):
    shipped = persona_memory.settings
    persona_memory.settings = shipped.replace(question_gate=None)
    try:
        assert persona_memory.question_gate is None
        for question in FACTUAL:
            found = persona_memory.lookup(question)
            assert not found.used_memory and "far from every preference" in found.reason
    finally:
        persona_memory.settings = shipped
    assert persona_memory.question_gate is not None


def test_gate_lets_the_personas_own_questions_through(persona_memory):
    questions = [q["question"] for q in load_sample_persona()["questions"]]
    used = [persona_memory.lookup(q).used_memory for q in questions]
    assert sum(used) >= len(questions) - 1


def test_regimes_differ_in_how_much_memory_enters(persona_memory):
    question = load_sample_persona()["questions"][0]["question"]
    conservative = persona_memory.context(question)
    aggressive = persona_memory.context(question, regime="aggressive")
    assert conservative.count("\n[") <= 3 and aggressive.count("\n[") >= conservative.count("\n[")
    assert "do not mention" in conservative and "Tailor" in aggressive
    assert persona_memory.context(FACTUAL[0], regime="aggressive") != ""  # no gate at all
    with pytest.raises(InvalidInputError, match="unknown regime"):
        persona_memory.context(question, regime="wild")


def test_int8_vectors_are_4x_smaller_and_agree(tmp_path, profile, embedder, reference_models):
    persona, corpus = load_sample_persona(), load_sample_corpus()[:80]
    questions = [q["question"] for q in persona["questions"]]
    tops, sizes = {}, {}
    for fmt in ("float32", "int8"):
        with _memory(tmp_path / f"{fmt}.epic", profile, embedder, reference_models, fmt) as m:
            m.add_preferences(persona["preferences"])
            m.ingest(corpus)
            # the gate off: this compares rankings, whatever the gate decides
            tops[fmt] = [{h.item_text for h in m.retrieve(q, 5, gate=-1.0)} for q in questions]
            sizes[fmt] = m.footprint()["vectors"]
        with _memory(tmp_path / f"{fmt}.epic", profile, embedder, reference_models) as again:
            assert [{h.item_text for h in again.retrieve(q, 5, gate=-1.0)}
                    for q in questions] == tops[fmt]
    assert sizes["float32"] / sizes["int8"] >= 3.5
    overlap = [len(a & b) / max(len(a), 1) for a, b in zip(tops["int8"], tops["float32"])]
    assert sum(overlap) / len(overlap) >= 0.95


def test_near_duplicate_instructions_merge_and_changed_items_replace(
        tmp_path, profile, embedder, reference_models):
    with _memory(tmp_path / "m.epic", profile, embedder, reference_models) as memory:
        memory.add_preference("I strictly follow a vegan diet")
        lead = "Tofu is a vegan protein made by coagulating soy milk and pressing the curds"
        first = memory.ingest([lead + " into blocks."])[0]
        second = memory.ingest([lead + " into soft blocks."])[0]  # a small edit
        assert first.entries_added == 1
        assert second.consolidated == 1 and second.entries_added == 0  # same lead -> merged
        assert memory.info()["entries"] == 1
        memory.ingest([Item("Seitan is a vegan wheat gluten food.", id="doc-7")])
        changed = memory.ingest([Item("Tempeh is a vegan fermented soybean cake.", id="doc-7")])
        assert changed[0].replaced == 1
        texts = {h.item_text for h in memory.retrieve("vegan protein", 10, gate=-1.0)}
        assert "Tempeh is a vegan fermented soybean cake." in texts
        assert "Seitan is a vegan wheat gluten food." not in texts
        assert memory.check().ok
