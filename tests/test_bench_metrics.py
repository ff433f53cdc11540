"""Judge-free bench metrics on hand-made cases: PAP weighting, Hit, routing, coverage."""

from __future__ import annotations

import math

import numpy as np
import pytest

from epic_edge_lab.metrics import (
    assign_links,
    coverage,
    hit_at_k,
    pap_at_k,
    routing_accuracy,
    summarize,
)


def test_pap_counts_entries_filed_under_gold_weighted_by_item_links():
    hits = [
        ("a", frozenset({"a"})),            # 1
        ("a", frozenset({"a", "b"})),       # 1/2: its item also serves b
        ("b", frozenset({"a", "b"})),       # 0: the entry is filed under b
        ("a", frozenset({"a", "b", "c"})),  # 1/3
        ("c", frozenset({"c"})),            # 0
    ]
    assert pap_at_k(hits, "a", k=5) == pytest.approx((1 + 1 / 2 + 1 / 3) / 5)


def test_pap_raw_items_use_links_and_tagging_everything_does_not_pay():
    everything = frozenset(range(10))
    tagged_all = [(None, everything)] * 5
    assert pap_at_k(tagged_all, 3) == pytest.approx(1 / 10)
    precise = [(None, frozenset({3}))] * 5
    assert pap_at_k(precise, 3) == 1.0
    assert pap_at_k([(None, frozenset())] * 5, 3) == 0.0


def test_pap_divides_by_k_even_with_fewer_hits_and_ignores_hits_past_k():
    assert pap_at_k([("g", frozenset({"g"}))], "g", k=5) == pytest.approx(0.2)
    hits = [("x", frozenset({"x"}))] * 5 + [("g", frozenset({"g"}))]
    assert pap_at_k(hits, "g", k=5) == 0.0
    with pytest.raises(ValueError):
        pap_at_k(hits, "g", k=0)


def test_hit_is_unweighted_any_match_in_top_k():
    hits = [("x", frozenset({"x"})), (None, frozenset({"g", "x", "y"}))]
    assert hit_at_k(hits, "g", k=5) == 1.0
    assert hit_at_k(hits, "g", k=1) == 0.0
    assert hit_at_k([], "g") == 0.0


def test_routing_accuracy_and_coverage():
    assert routing_accuracy([1, 2, 3, 3], [1, 2, 0, 3]) == 0.75
    with pytest.raises(ValueError):
        routing_accuracy([1], [1, 2])
    assert coverage({1, 2, 3, 4}, [1, 1, 3]) == 0.5
    assert math.isnan(coverage(set(), [1]))


def test_assign_links_is_p_rel_at_tau():
    prefs = np.eye(3, dtype=np.float32)
    items = np.array([[1, 0, 0], [0.6, 0.8, 0], [0, 0, -1]], dtype=np.float32)
    assert assign_links(items, prefs, 0.5) == [frozenset({0}), frozenset({0, 1}), frozenset()]


def test_summarize_reports_milliseconds():
    s = summarize([0.001, 0.002, 0.003])
    assert s["median_ms"] == pytest.approx(2.0) and s["n"] == 3
    assert summarize([])["n"] == 0
