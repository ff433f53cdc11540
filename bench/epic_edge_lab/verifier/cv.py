"""Out-of-fold scores for the learned verifier, so its Keep threshold is not fitted in-sample."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from epic_edge_lab.calibrate import LabelledPair, best_f1_threshold, keep_metrics


def preference_folds(pairs: Sequence[LabelledPair], k: int, seed: int = 123) -> np.ndarray:
    """Fold index (0..k-1) of each pair; all pairs of one preference share a fold, as the
    train/test split keeps a preference on one side (so folds measure unseen preferences)."""
    if k < 2:
        raise ValueError(f"need at least 2 folds, not {k}")
    prefs = sorted({p.preference for p in pairs})
    if len(prefs) < k:
        raise ValueError(f"{len(prefs)} preferences cannot fill {k} folds")
    fold_of = dict(zip(prefs, np.random.default_rng(seed).permutation(len(prefs)) % k))
    return np.array([fold_of[p.preference] for p in pairs])


def out_of_fold_scores(pairs: Sequence[LabelledPair], k: int,
                       fit: Callable[[list[LabelledPair]], Any],
                       score: Callable[[Any, list[LabelledPair]], np.ndarray],
                       log: Callable[[str], None] = print) -> np.ndarray:
    """Each pair scored by a model `fit` on the other k-1 folds, in the pairs' order."""
    folds = preference_folds(pairs, k)
    out = np.zeros(len(pairs), dtype=np.float64)
    for f in range(k):
        held = np.flatnonzero(folds == f)
        model = fit([p for p, g in zip(pairs, folds) if g != f])
        out[held] = score(model, [pairs[i] for i in held])
        log(f"fold {f + 1}/{k}: {len(held)} held-out pairs scored")
    return out


def out_of_fold_threshold(pairs: Sequence[LabelledPair], k: int,
                          fit: Callable[[list[LabelledPair]], Any],
                          score: Callable[[Any, list[LabelledPair]], np.ndarray],
                          log: Callable[[str], None] = print) -> tuple[float, dict[str, Any]]:
    """(best-F1 threshold on out-of-fold scores, a note for the manifest)."""
    scores = out_of_fold_scores(pairs, k, fit, score, log)
    labels = [p.keep for p in pairs]
    threshold = best_f1_threshold(scores, labels)
    f1 = keep_metrics(labels, scores >= threshold)["f1"]
    return threshold, {"threshold_fitted_on": f"train, {k}-fold out-of-fold scores grouped by "
                                              "preference", "out_of_fold_f1": round(f1, 4)}
