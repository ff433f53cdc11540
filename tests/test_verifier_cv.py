"""Out-of-fold threshold for the learned verifier: folds group preferences, no pair sees itself."""

from __future__ import annotations

import numpy as np
import pytest

from epic_edge_lab.calibrate import load_verification_set
from epic_edge_lab.verifier.cv import (
    out_of_fold_scores,
    out_of_fold_threshold,
    preference_folds,
)

PAIRS = load_verification_set("train")[:120]


def test_folds_keep_each_preference_whole_and_are_deterministic() -> None:
    folds = preference_folds(PAIRS, 3)
    assert set(folds) == {0, 1, 2}
    by_pref: dict[str, set[int]] = {}
    for pair, f in zip(PAIRS, folds):
        by_pref.setdefault(pair.preference, set()).add(int(f))
    assert all(len(s) == 1 for s in by_pref.values())
    assert np.array_equal(folds, preference_folds(PAIRS, 3))
    with pytest.raises(ValueError):
        preference_folds(PAIRS, 1)


def test_every_pair_is_scored_by_a_model_that_never_saw_it() -> None:
    seen_by: dict[int, set[int]] = {}

    def fit(train):
        model = {p.id for p in train}
        seen_by[len(seen_by)] = model
        return model

    def score(model, held):
        assert not model & {p.id for p in held}
        return np.array([0.9 if p.keep else 0.1 for p in held])

    scores = out_of_fold_scores(PAIRS, 3, fit, score, log=lambda _: None)
    assert len(seen_by) == 3 and scores.shape == (len(PAIRS),)
    threshold, note = out_of_fold_threshold(PAIRS, 3, fit, score, log=lambda _: None)
    assert 0.1 < threshold <= 0.9 and note["out_of_fold_f1"] == 1.0
    assert "out-of-fold" in note["threshold_fitted_on"]
