"""The everyday implicit question on the linux-cpu default: real MiniLM, learned decision."""

from __future__ import annotations

import pytest

from epic_edge.cli import main
from epic_edge.memory import Memory

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
    assert not found.used_memory and found.hits == [] and "best entry" in found.reason
    assert memory.context(NITROGEN) == ""


def test_the_bistro_ranks_first_for_dinner(vegan):
    memory, path = vegan
    hits = memory.retrieve(DINNER, gate=-1.0)
    assert hits and hits[0].item_text == BISTRO
    assert all(h.item_text != TAX for h in hits)
    assert BISTRO in memory.context(DINNER, regime="aggressive")


@pytest.mark.xfail(strict=True, reason="the default gate (item_gate 0.38, calibrated on the "
                   "judged dev split) scores this bistro at 0.289 for the question: the "
                   "implicit question gets no memory by default (BENCHMARKS.md)")
def test_the_default_gate_gives_the_implicit_dinner_question_its_memory(vegan, capsys):
    memory, path = vegan
    assert memory.lookup(DINNER).used_memory
    assert BISTRO in memory.context(DINNER)
    assert main(["query", DINNER, "--memory", str(path), "--json"]) == 0
    assert BISTRO in capsys.readouterr().out
