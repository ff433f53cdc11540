"""The whole linux-cpu pipeline on real models: ONNX MiniLM, the learned decision, FAISS; and
SmolLM2 via llama.cpp writing instructions when a profile asks for it."""

from __future__ import annotations

import pytest

from epic_edge.datasets import load_sample_corpus, load_sample_persona
from epic_edge.memory import Memory

pytest.importorskip("llama_cpp")
pytest.importorskip("faiss")


@pytest.fixture(scope="module")
def built(tmp_path_factory, reference_models):
    """A memory of the sample persona over 40 sample passages, built once for this module."""
    path = tmp_path_factory.mktemp("e2e") / "persona0.epic"
    persona = load_sample_persona()
    corpus = load_sample_corpus()
    items = corpus[:20] + corpus[-20:]  # on-topic titles come first, random ones last
    with Memory.open(path, "linux-cpu", model_dir=reference_models) as memory:
        memory.add_preferences(persona["preferences"])
        stats = memory.ingest(items, batch_size=8)
        questions = [q["question"] for q in persona["questions"]]
        results = [memory.retrieve(q) for q in questions]
    return path, stats, questions, results, reference_models


def test_pipeline_filters_verifies_and_indexes(built):
    _, stats, _, results, _ = built
    seen = sum(s.seen for s in stats)
    passed = sum(s.passed_filter for s in stats)
    assert seen == 40
    assert 0 < passed < seen  # the coarse filter drops some items without an LLM call
    assert sum(s.verified for s in stats) == passed
    kept = sum(s.kept for s in stats)
    assert sum(s.llm_calls for s in stats) == 0  # the learned decision; template instructions
    assert sum(s.entries_added + s.consolidated for s in stats) >= kept
    if kept:
        hits = [h for hits in results for h in hits]
        assert hits and all(h.instruction.strip() and h.item_text for h in hits)
        assert all(0.0 <= h.confidence <= 1.0 for h in hits)


def test_reopening_gives_identical_results(built):
    path, _, questions, results, models = built
    with Memory.open(path, "linux-cpu", model_dir=models) as memory:
        assert [memory.retrieve(q) for q in questions] == results
        fp = memory.footprint()
        assert fp["total"] == path.stat().st_size > 0  # the WAL is checkpointed first


def test_llm_writes_instructions_when_the_profile_asks(tmp_path, reference_models):
    from dataclasses import replace

    from epic_edge.profiles import load_profile

    base = load_profile("linux-cpu")
    prof = replace(base, verifier={**base.verifier, "instructions": "llm"})
    persona = load_sample_persona()
    with Memory.open(tmp_path / "llm.epic", prof, model_dir=reference_models) as memory:
        memory.add_preferences(persona["preferences"])
        stats = memory.ingest(load_sample_corpus()[:12], batch_size=6)
    kept = sum(s.kept for s in stats)
    assert kept > 0
    # the learned verifier decides; the LLM writes one instruction per kept preference (<= 2)
    assert kept <= sum(s.llm_calls for s in stats) <= 2 * kept
