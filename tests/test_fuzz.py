"""Property-based tests over the public API: odd input never crashes or corrupts a memory."""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from functools import lru_cache
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from epic_edge.backends.numpy_index import NumpyIndex
from epic_edge.errors import InvalidInputError
from epic_edge.items import expand
from epic_edge.memory import Memory
from fakes import BagOfWordsEmbedder, KeywordVerifier

# any unicode (control characters included), words the fake embedder knows, raw bytes
WORDS = st.sampled_from("vegan tofu electric battery river opera tax".split())
TEXT = st.one_of(
    st.text(max_size=200),
    st.lists(WORDS, min_size=1, max_size=12).map(" ".join),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=50).map(lambda t: t + " vegan"),
)
ITEM = st.one_of(
    TEXT, st.binary(max_size=120), st.builds(dict, text=TEXT, source=st.text(max_size=20))
)
CASES: Counter[str] = Counter()  # generated cases run, read by scripts/reliability_report.py
# scripts/reliability_report.py raises the count through EPIC_FUZZ_EXAMPLES
FAST = settings(max_examples=int(os.environ.get("EPIC_FUZZ_EXAMPLES", "400")), deadline=None)


@FAST
@given(st.lists(ITEM, max_size=20))
def test_expand_yields_clean_items_or_skips(items):
    CASES["expand"] += 1
    for item in expand(items):
        if item is not None:
            assert item.text.strip() and "\x00" not in item.text
            assert len(item.text.split()) <= 300


@lru_cache(maxsize=1)
def _shared_memory() -> Memory:
    """One fake-backed memory with preferences and a few items, shared by the question test."""
    emb = BagOfWordsEmbedder()
    folder = tempfile.mkdtemp(prefix="epic-fuzz-")
    memory = Memory.open(Path(folder) / "m.epic", embedder=emb, verifier=KeywordVerifier(),
                         index=NumpyIndex(emb.dim), tau=0.1)
    memory.add_preferences(["vegan tofu cooking", "electric battery cars"])
    memory.ingest(["vegan tofu curry", "electric battery range", "opera in Vienna"])
    return memory


@FAST
@given(TEXT)
def test_questions_give_hits_or_a_clear_error(question):
    CASES["retrieve"] += 1
    memory = _shared_memory()
    try:
        hits = memory.retrieve(question, k=3)
    except InvalidInputError:
        assert not question.split()
        return
    assert len(hits) <= 3
    assert all(h.preference in memory.preferences() for h in hits)


class MemoryMachine(RuleBasedStateMachine):
    """Random sequences of preference changes, ingests, queries; the file stays sound."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.TemporaryDirectory()
        emb = BagOfWordsEmbedder()
        self.memory = Memory.open(Path(self.dir.name) / "m.epic", embedder=emb,
                                  verifier=KeywordVerifier(), index=NumpyIndex(emb.dim), tau=0.1)

    @rule(text=TEXT)
    def add_preference(self, text):
        CASES["machine step"] += 1
        try:
            self.memory.add_preference(text)
        except InvalidInputError:
            assert not text.split()

    @rule(items=st.lists(ITEM, max_size=8), batch=st.integers(1, 4))
    def ingest(self, items, batch):
        CASES["machine step"] += 1
        try:
            stats = self.memory.ingest(items, batch_size=batch)
        except InvalidInputError:
            assert not self.memory.preferences()
            return
        assert sum(s.seen for s in stats) >= sum(s.passed_filter for s in stats)

    @rule(question=TEXT)
    def retrieve(self, question):
        CASES["machine step"] += 1
        try:
            self.memory.retrieve(question)
        except InvalidInputError:
            assert not question.split()

    @rule(pick=st.integers(0, 20))
    def remove_preference(self, pick):
        CASES["machine step"] += 1
        prefs = self.memory.preferences()
        if prefs:
            self.memory.remove_preference(prefs[pick % len(prefs)])

    @invariant()
    def index_matches_file(self):
        assert len(self.memory.index) == self.memory.store.count("entries")

    def teardown(self) -> None:
        report = self.memory.check()
        self.memory.close()
        self.dir.cleanup()
        assert report.ok, report.problems


TestMemoryMachine = MemoryMachine.TestCase
MACHINE_SETTINGS = settings(max_examples=60, stateful_step_count=25, deadline=None)
TestMemoryMachine.settings = MACHINE_SETTINGS
