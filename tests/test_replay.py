"""Verdicts judged ahead by a pool and replayed to a memory's ingest (the Ray engine's glue)."""

from __future__ import annotations

import numpy as np
import pytest

from epic_edge.backends.numpy_index import NumpyIndex
from epic_edge.errors import ModelNotFoundError
from epic_edge.memory import Memory
from epic_edge_lab.replay import ReplayVerifier, judge, survivors
from fakes import BagOfWordsEmbedder, KeywordVerifier

PREFS = ["vegan food and cooking", "hiking in the mountains"]
ITEMS = ["Tofu is a vegan protein for cooking.", "Mountain hiking trails in the Alps.",
         "Vegan cooking on a mountain hiking trip.", "The stock market fell today."]


class Flaky(KeywordVerifier):
    """Fails on items that mention `bad`; a missing model when `setup` is set."""

    def __init__(self, bad: str = "", setup: bool = False) -> None:
        super().__init__()
        self.bad, self.setup = bad, setup

    def verify(self, item, candidates):  # type: ignore[no-untyped-def]
        if self.setup:
            raise ModelNotFoundError("no model here")
        if self.bad and self.bad in item:
            raise TimeoutError("server did not answer")
        return super().verify(item, candidates)


def _memory(path, verifier) -> Memory:  # type: ignore[no-untyped-def]
    embedder = BagOfWordsEmbedder()
    memory = Memory.open(path, embedder=embedder, verifier=verifier,
                         index=NumpyIndex(embedder.dim), tau=0.2)
    memory.add_preferences(PREFS)
    return memory


def _jobs(memory: Memory) -> list:
    steering = memory.steering
    texts = [p.text for p in steering.preferences]
    rows = survivors(memory.embedder.embed(ITEMS), steering.vectors, memory.tau)
    return [(ITEMS[i], tuple(texts[j] for j in row)) for i, row in enumerate(rows) if row]


def _entries(memory: Memory) -> list:
    o = memory.store.sealer.open
    return sorted((o(item), o(pref), o(instruction), confidence)
                  for item, pref, instruction, confidence in memory.store.conn.execute(
        "SELECT i.text, p.text, e.instruction, e.confidence FROM entries e JOIN items i ON "
        "i.id = e.item_id JOIN preferences p ON p.id = e.preference_id"))


def test_replayed_verdicts_build_the_same_memory(tmp_path):
    direct = _memory(tmp_path / "direct.epic", KeywordVerifier())
    direct.ingest(ITEMS)
    replay = ReplayVerifier()
    ahead = _memory(tmp_path / "ahead.epic", replay)
    jobs = _jobs(ahead)
    replay.add(jobs, judge(KeywordVerifier(), jobs))
    ahead.ingest(ITEMS)
    assert replay.misses == 0 and replay.hits == len(jobs) > 1
    assert _entries(ahead) == _entries(direct) != []


def test_a_job_the_pool_failed_on_is_asked_again_by_the_persona(tmp_path):
    replay = ReplayVerifier(fallback=KeywordVerifier)
    memory = _memory(tmp_path / "m.epic", replay)
    jobs = _jobs(memory)
    verdicts = judge(Flaky(bad="Tofu"), jobs)
    assert [v is None for v in verdicts] == ["Tofu" in text for text, _ in jobs]
    replay.add(*zip(*[(j, v) for j, v in zip(jobs, verdicts) if v is not None]))
    memory.ingest(ITEMS)
    assert replay.misses == 1  # the tofu item went to the real verifier
    assert any("Tofu" in row[0] for row in _entries(memory))


def test_a_verifier_that_cannot_be_built_stops_the_pool(tmp_path):
    memory = _memory(tmp_path / "m.epic", ReplayVerifier())
    with pytest.raises(ModelNotFoundError):
        judge(Flaky(setup=True), _jobs(memory))


def test_survivors_are_best_first_positions():
    prefs = np.array([[1.0, 0.0], [0.6, 0.8]], np.float32)
    items = np.array([[0.6, 0.8], [0.0, -1.0]], np.float32)
    assert survivors(items, prefs, 0.5) == [[1, 0], []]
