"""The everyday implicit question on the linux-cpu default: real MiniLM, learned decision."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from epic_edge.background import BackgroundGate
from epic_edge.cli import main
from epic_edge.errors import InvalidInputError
from epic_edge.memory import Memory
from epic_edge.profiles import load_profile

pytest.importorskip("faiss")

VEGAN = "I strictly follow a vegan diet and never eat animal products."
STEAKHOUSE = ("Hawksmoor is a steakhouse that serves dry-aged British beef steaks, lamb chops and "
              "bone marrow, with a long wine list and a Sunday roast.")
BISTRO = ("Green Table is a vegan bistro in the old town: its seasonal plant-based menu has no "
          "meat, dairy or eggs, and it is open for dinner until eleven.")
TAX = ("Your tax return for 2025 is due on 31 January; keep the receipts for charitable "
       "donations and home-office costs.")
DINNER = "Where should I go out for dinner tonight?"
NITROGEN = "What is the boiling point of nitrogen?"


@pytest.fixture(scope="module")
def vegan(tmp_path_factory, reference_models):
    path = tmp_path_factory.mktemp("vegan") / "m.epic"
    with Memory.open(path, model_dir=reference_models) as memory:
        memory.add_preferences([VEGAN])
        memory.ingest([STEAKHOUSE, BISTRO, TAX])
    with Memory.open(path, model_dir=reference_models) as memory:
        yield memory, path


def test_a_factual_question_gets_no_memory(vegan):
    memory, _ = vegan
    found = memory.lookup(NITROGEN)
    assert not found.used_memory and found.hits == []
    assert "no preference bears on" in found.reason  # the question gate, first
    assert memory.context(NITROGEN) == ""
    shipped = memory.settings  # without it, the item gate keeps it out as before
    memory.settings = shipped.replace(question_gate=None)
    try:
        found = memory.lookup(NITROGEN)
        assert not found.used_memory and "best entry" in found.reason
    finally:
        memory.settings = shipped


def test_the_bistro_ranks_first_for_dinner(vegan):
    memory, path = vegan
    hits = memory.retrieve(DINNER, gate=-1.0)
    assert hits and hits[0].item_text == BISTRO
    assert all(h.item_text != TAX for h in hits)
    assert BISTRO in memory.context(DINNER, regime="aggressive")


def test_the_default_gate_gives_the_implicit_dinner_question_its_memory(vegan, capsys):
    memory, path = vegan
    found = memory.lookup(DINNER)
    assert found.used_memory and "best entry" in found.reason
    assert memory.retrieve(DINNER)[0].item_text == BISTRO
    context = memory.context(DINNER)
    assert BISTRO in context and TAX not in context
    assert STEAKHOUSE not in context or context.index(BISTRO) < context.index(STEAKHOUSE)
    assert main(["query", DINNER, "--memory", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["item_text"] == BISTRO


def test_steering_by_text_keeps_the_bistro_first_and_pays_only_past_the_gate(vegan,
                                                                           reference_models):
    _, path = vegan
    linux = load_profile("linux-cpu")
    by_text = replace(linux, retrieval={**linux.retrieval, "steer_by": "text"})
    with Memory.open(path, by_text, model_dir=reference_models) as memory:
        found = memory.lookup(DINNER)
        assert found.used_memory and found.hits[0].item_text == BISTRO
        assert "steer by text" in found.timings  # one more embedding, after the gate
        assert "steer by text" not in memory.lookup(NITROGEN).timings


def test_the_item_cut_is_measured_in_the_memory_it_gates(vegan, tmp_path, reference_models):
    memory, _ = vegan
    path = tmp_path / "big.epic"
    with Memory.open(path, model_dir=reference_models) as big:
        big.add_preferences([VEGAN])
        curries = [f"Lentil curry number {n} is a vegan dish of red lentils, tomato and "
                   f"coconut milk." for n in range(20)]
        big.ingest([BISTRO, STEAKHOUSE, *curries])
        assert big.item_gate_now() > memory.item_gate_now()  # more entries, higher chance
        big.forget(big.entries(limit=1)[0].item_id)
        after_forget = big.item_gate_now()  # recomputed, not the cached cut
    with Memory.open(path, model_dir=reference_models) as reopened:
        assert reopened.item_gate_now() == after_forget


@pytest.mark.parametrize("quantile", [0.0, 1.0, 1.5, -0.1])
def test_an_item_gate_quantile_outside_0_1_is_refused(quantile):
    with pytest.raises(InvalidInputError, match="item_gate_quantile"):
        BackgroundGate(quantile)
