"""Shared fixtures: fake-backed memories for core tests."""

from __future__ import annotations

import pytest
from epic_edge.backends.numpy_index import NumpyIndex
from fakes import BagOfWordsEmbedder, KeywordVerifier

from epic_edge.memory import Memory


@pytest.fixture
def fake_memory(tmp_path):
    """A memory over the bag-of-words embedder, keyword verifier and numpy index."""
    embedder = BagOfWordsEmbedder()
    memory = Memory.open(tmp_path / "m.epic", embedder=embedder, verifier=KeywordVerifier(),
                         index=NumpyIndex(embedder.dim), tau=0.2)
    yield memory
    memory.close()
