"""Lexical evidence: BM25 over the entries, its cache, and how it reorders a memory's hits."""

from __future__ import annotations

import pytest

from epic_edge.lexical import BM25

KYOTO = ["A vegan bistro in Kyoto", "A steakhouse in Kyoto", "A steakhouse in Osaka",
         "Income tax is collected monthly"]


def test_bm25_ranks_the_passage_sharing_the_rarer_term_first():
    lexical = BM25(KYOTO)
    scores = lexical.scores("Where should we eat vegan food in Kyoto?")
    assert scores[0] > scores[1] > 0.0  # "vegan" is rarer than "kyoto"
    assert scores[2] == scores[3] == 0.0
    assert lexical.normalised("vegan Kyoto").max() == 1.0
    # stopwords and one-letter words match nothing: all zeros, no division by zero
    assert not lexical.normalised("Where should we go? a").any()
    assert BM25([]).normalised("vegan").shape == (0,)


@pytest.fixture
def kyoto_memory(fake_memory):
    fake_memory.add_preferences(["I follow a vegan diet and eat plant foods only",
                                 "I enjoy steakhouse dinners with friends"])
    fake_memory.ingest(["Kyoto has a quiet vegan bistro with plant dishes",
                        "A vegan diet of plant foods avoids meat, eggs and dairy products",
                        "A steakhouse serves steak dinners to friends in Osaka"])
    return fake_memory


def test_lexical_evidence_lifts_the_entry_sharing_the_question_s_rare_word(kyoto_memory):
    question = "Where do vegans eat plant foods in Kyoto?"
    kyoto_memory.settings = kyoto_memory.settings.replace(lexical=None)
    by_vector = [h.item_text for h in kyoto_memory.retrieve(question, k=2)]
    kyoto_memory.settings = kyoto_memory.settings.replace(lexical=1.0)
    fused = [h.item_text for h in kyoto_memory.retrieve(question, k=2)]
    assert by_vector[0].startswith("A vegan diet") and fused[0].startswith("Kyoto")
    assert sorted(fused) == sorted(by_vector)  # the same hits, reordered


def test_lexical_evidence_follows_the_memory_as_it_changes(kyoto_memory):
    def nara_score() -> float:
        ids, scores = kyoto_memory.lexical_evidence.scores(
            kyoto_memory.store, kyoto_memory.entry_index, "a restaurant in Nara")
        assert ids.tolist() == kyoto_memory.entry_index.ids.tolist()
        return float(scores.max()) if len(scores) else 0.0

    assert nara_score() == 0.0
    kyoto_memory.ingest(["Nara has a small vegan restaurant with plant foods"])
    assert nara_score() == 1.0  # rebuilt after the ingest: the new entry is found
    kyoto_memory.remove_preference("I follow a vegan diet and eat plant foods only")
    assert nara_score() == 0.0  # and after its entries left
