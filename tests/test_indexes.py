"""FAISS and numpy indexes: identical top-k, removal, re-adding an id, empty index."""

from __future__ import annotations

import numpy as np
import pytest

from epic_edge.backends.numpy_index import NumpyIndex
from epic_edge.stages import normalize_rows

faiss_index = pytest.importorskip("epic_edge.backends.faiss_index")


def _both(dim):
    return [faiss_index.FaissIndex(dim), NumpyIndex(dim)]


def test_identical_top_k_on_random_unit_vectors():
    rng = np.random.default_rng(0)
    vectors = normalize_rows(rng.normal(size=(500, 64)))
    ids = rng.permutation(10_000)[:500].astype(np.int64)
    queries = normalize_rows(rng.normal(size=(20, 64)))
    results = []
    for index in _both(64):
        index.add(ids, vectors)
        results.append(index.search(queries, 7))
    (fs, fi), (ns, ni) = results
    np.testing.assert_array_equal(fi, ni)
    np.testing.assert_allclose(fs, ns, rtol=1e-5, atol=1e-6)


def test_remove_and_readd_replaces_vectors():
    for index in _both(4):
        index.add(np.array([1, 2, 3]), np.eye(3, 4))
        assert index.remove(np.array([2, 99])) == 1 and len(index) == 2
        index.add(np.array([1]), np.array([[0, 0, 0, 1.0]]))  # same id, new vector
        assert len(index) == 2
        scores, ids = index.search(np.array([[0, 0, 0, 1.0]]), 3)
        assert ids[0].tolist() == [1, 3, -1] and scores[0, 0] == pytest.approx(1.0)


def test_empty_index_returns_no_ids():
    for index in _both(8):
        scores, ids = index.search(np.ones((2, 8)), 5)
        assert ids.shape == (2, 5) and (ids == -1).all() and len(index) == 0
        assert index.remove(np.array([1])) == 0
