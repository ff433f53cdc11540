"""MemorySettings: built from a profile's [retrieval], checked, handed to Memory by open."""

from __future__ import annotations

import dataclasses
from typing import Generic, Protocol

import pytest

from epic_edge.errors import InvalidInputError
from epic_edge.ingest import Judged
from epic_edge.inspection import Inspected
from epic_edge.memory import Memory
from epic_edge.preference_edits import Edited
from epic_edge.profiles import load_profile
from epic_edge.remembering import Remembering
from epic_edge.retrieval import Searched
from epic_edge.settings import MemorySettings
from epic_edge.stages import PAPER_STEER_BY, PAPER_STEER_WEIGHT
from epic_edge.transfer import Moved
from fakes import BagOfWordsEmbedder, KeywordVerifier

VEGAN = "I follow a vegan diet"


def test_the_profile_s_retrieval_section_is_the_source():
    shipped = load_profile("linux-cpu")
    settings = MemorySettings.from_profile(shipped)
    retrieval = {k: v for k, v in shipped.retrieval.items() if k != "calibrated_for"}
    assert {k: getattr(settings, k) for k in retrieval} == retrieval
    assert (settings.steer_weight, settings.steer_by) == (PAPER_STEER_WEIGHT, PAPER_STEER_BY)
    assert settings.consolidate_threshold == 0.95
    # another embedder model: only k holds, every calibrated knob is off
    off = MemorySettings.from_profile(shipped, calibrated=False, k=3)
    assert off == MemorySettings(k=3)


@pytest.mark.parametrize(("data", "message"), [
    ({"gates": 0.1}, "gates is not a known key"), ({"gate": 2.0}, "gate is 2.0; at most 1.0"),
    ({"k": 0}, "k is 0; at least 1"), ({"steer_by": "mood"}, "steer_by is 'mood'"),
    ({"lexical": "high"}, "lexical must be float"), ({"steer_weight": None}, "must be set"),
    ({"calibrated_for": "x"}, "calibrated_for is not a known key"),
])
def test_an_unknown_key_or_a_bad_value_is_one_clear_error(data, message):
    with pytest.raises(InvalidInputError, match=message):
        MemorySettings.from_dict(data)
    with pytest.raises(InvalidInputError, match=message):
        MemorySettings().replace(**data)


def test_settings_are_frozen_and_replace_checks():
    import epic_edge

    assert epic_edge.MemorySettings is MemorySettings  # part of the API, as Memory is
    settings = MemorySettings(lexical=0.1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.lexical = 0.2  # type: ignore[misc]
    assert settings.replace(brevity=0.3) == MemorySettings(lexical=0.1, brevity=0.3)
    assert settings.ranking() == {"lexical": 0.1, "confidence": None, "brevity": None}


def test_open_hands_memory_its_settings_and_a_change_takes_effect_at_once(tmp_path):
    shipped = load_profile("linux-cpu")
    same = BagOfWordsEmbedder(dim=384, name=shipped.retrieval["calibrated_for"])
    with Memory.open(tmp_path / "m.epic", shipped, embedder=same, verifier=KeywordVerifier(),
                     k=2) as memory:
        assert memory.settings == MemorySettings.from_profile(shipped, k=2)
        memory.add_preferences([VEGAN])
        assert memory.steering.hedge == shipped.retrieval["hedge"]
        assert memory.background is not None
        memory.settings = memory.settings.replace(hedge=None, item_gate_quantile=None)
        assert memory.steering.hedge is None and memory.background is None
        assert memory.info()["k"] == 2


@pytest.mark.parametrize("protocol", [Edited, Judged, Remembering, Moved, Inspected, Searched])
def test_memory_has_what_each_helper_reads_of_it(tmp_path, protocol):
    names = {name for cls in protocol.__mro__ if cls not in (Protocol, Generic, object)
             for name in [*getattr(cls, "__annotations__", {}), *vars(cls)]
             if not name.startswith("_")}
    with Memory.open(tmp_path / "m.epic", embedder=BagOfWordsEmbedder(), tau=0.2,
                     verifier=KeywordVerifier()) as memory:
        assert names and not {name for name in names if not hasattr(memory, name)}


def test_a_question_whose_raw_hits_are_strong_is_not_steered(fake_memory):
    fake_memory.add_preferences(["I love hiking in the mountains", "I collect vinyl jazz records"])
    fake_memory.ingest(["mountains hiking trail guide", "jazz vinyl records shop",
                        "hiking boots for mountains"])
    question = "hiking trail guide"
    steered = [h.score for h in fake_memory.lookup(question).hits]
    raw = [h.item_text for h in fake_memory.lookup(question, steer=False).hits]
    fake_memory.settings = fake_memory.settings.replace(no_steering_from=-1.0)
    eased = fake_memory.lookup(question)
    assert [h.item_text for h in eased.hits] == raw
    assert [h.score for h in eased.hits] == [h.score for h in
                                             fake_memory.lookup(question, steer=False).hits]
    assert steered != [h.score for h in eased.hits]  # the full pull moves the scores
