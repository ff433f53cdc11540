"""EntryIndex: the memory's vector index, its ids and vector format, behind public methods."""

from __future__ import annotations

import numpy as np

from epic_edge.backends.numpy_index import NumpyIndex
from epic_edge.entry_index import EntryIndex
from epic_edge.memory import Memory
from epic_edge.stages import normalize_rows
from fakes import BagOfWordsEmbedder, KeywordVerifier


def _vectors(n: int, dim: int = 8) -> np.ndarray:
    return normalize_rows(np.random.default_rng(0).normal(size=(n, dim)).astype(np.float32))


def test_an_empty_index_given_to_open_is_the_one_used(fake_memory, tmp_path):
    embedder, index = BagOfWordsEmbedder(), NumpyIndex(256)
    assert len(index) == 0  # falsy: `index or profile's index` used to replace it with FAISS
    with Memory.open(tmp_path / "m.epic", embedder=embedder, verifier=KeywordVerifier(),
                     index=index, tau=0.2) as memory:
        assert memory.entry_index.index is index
    assert isinstance(fake_memory.index, NumpyIndex)  # the fixture runs on numpy, as meant


def test_add_remove_and_replace_keep_the_ids_in_step():
    entries = EntryIndex(NumpyIndex(8), 8)
    vectors = _vectors(4)
    entries.add(np.arange(1, 5), vectors)
    assert entries.ids.tolist() == [1, 2, 3, 4] and len(entries) == 4
    entries.remove([2, 3])
    assert entries.ids.tolist() == [1, 4] and len(entries) == 2
    scores, ids = entries.search(vectors[3], 2)
    assert ids[0].tolist() == [4, 1] and abs(scores[0][0] - 1.0) < 1e-5
    entries.replace_all(np.array([7]), vectors[:1])
    assert entries.ids.tolist() == [7] and len(entries) == 1
    assert abs(entries.best_score(vectors[0]) - 1.0) < 1e-5


def test_vectors_are_searched_as_the_file_stores_them():
    vectors = _vectors(3)
    exact, int8 = EntryIndex(NumpyIndex(8), 8), EntryIndex(NumpyIndex(8), 8, "int8")
    for entries in (exact, int8):
        entries.add(np.arange(3), vectors)
    exact_scores = exact.search(vectors[0], 3)[0]
    int8_scores = int8.search(vectors[0], 3)[0]
    assert not np.array_equal(exact_scores, int8_scores)  # int8 round-trip moves scores
    assert np.allclose(exact_scores, int8_scores, atol=0.02)


def test_an_empty_index_scores_minus_one():
    assert EntryIndex(NumpyIndex(8), 8).best_score(_vectors(1)[0]) == -1.0
