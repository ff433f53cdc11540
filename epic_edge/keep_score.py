"""The keep score: P(an item bears on a preference) from the embedder's and the decision's views.

The learned decision was trained on encyclopedia passages; on a person's own short notes, chats
and receipts it ranks worse than the raw cosine (docs/personal-stream.md). The keep score is a
logistic model over what ingest already holds for a pair (the item's and the preference's
embedder vectors and the item's own, their cosine, how far it stands above the item's other
preferences, the decision's P(Keep) and the item's length), trained by the lab
(`epic-edge-lab train-keep-score`) on labelled pairs that include the personal kinds, and
calibrated so that its output is a probability. The learned verifier keeps what its decision
keeps and, below the decision's floor, rescues a pair whose P(bears) reaches `threshold`: such
an entry is stored below every one the decision kept (floor x P(bears)), so a full memory
evicts it first (epic_edge.maintenance).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from epic_edge.calibrated import CalibratedScore

SCALARS = ("log_words", "cosine", "cosine_margin", "decision_logit")
P_MIN = 1e-6


def pair_features(item_vector: np.ndarray, preference_vectors: np.ndarray,
                  p_keep: np.ndarray, words: int) -> np.ndarray:
    """One row per preference: SCALARS, then u*v and |u-v| of the embedder's unit vectors,
    then the item's own vector u (what kind of item it is, whatever the preference).

    `preference_vectors` are all the memory's preferences (the margin is over them) and
    `p_keep` the decision's P(Keep) for each (NaN where it was not asked)."""
    u = np.asarray(item_vector, np.float64).reshape(1, -1)
    v = np.asarray(preference_vectors, np.float64)
    cos = (v @ u[0]).reshape(-1)
    if len(cos) > 1:
        top = np.sort(cos)[::-1]
        other = np.where(cos >= top[0], top[1], top[0])
    else:
        other = np.zeros_like(cos)
    p = np.clip(np.asarray(p_keep, np.float64).reshape(-1), P_MIN, 1.0 - P_MIN)
    logit = np.log(p) - np.log1p(-p)
    scalars = np.column_stack([np.full(len(cos), np.log(max(int(words), 1))), cos,
                               cos - other, logit])
    return np.hstack([scalars, u * v, np.abs(u - v), np.repeat(u, len(cos), axis=0)])


@dataclass(frozen=True)
class KeepScore(CalibratedScore):
    """P(bears) = sigmoid(slope * (features . weights + bias) + offset) of pair_features;
    keep at >= threshold."""

    WHAT = "keep score"
    FEATURES = [*SCALARS, "u*v", "|u-v|", "u"]

    def for_item(self, item_vector: np.ndarray, preference_vectors: np.ndarray,
                 candidates: Sequence[int], words: int) -> Callable[[np.ndarray], np.ndarray]:
        """P(bears) of one item's candidate preferences (rows of preference_vectors) from
        the decision's P(Keep) of each: what a verifier's verify takes as `rescore`."""
        rows = np.asarray(list(candidates), dtype=np.int64)

        def rescore(p_keep: np.ndarray) -> np.ndarray:
            full = np.full(len(preference_vectors), 0.5)
            full[rows] = np.asarray(p_keep, np.float64).reshape(-1)
            features = pair_features(item_vector, preference_vectors, full, words)
            return self.probabilities(features[rows])

        return rescore


def rescore_of(verifier: Any, preferences: Sequence[Any], preference_vectors: np.ndarray,
               item_vector: np.ndarray, candidates: Sequence[Any], text: str
               ) -> Callable[[np.ndarray], np.ndarray] | None:
    """The keep score of one item's coarse-filter candidates (each with a `.preference`), as
    ingest and `explain` hand it to the verifier; None when the verifier has no keep score."""
    keep = getattr(verifier, "keep_score", None)
    if keep is None:
        return None
    row = {p.id: n for n, p in enumerate(preferences)}
    return keep.for_item(item_vector, preference_vectors,
                         [row[c.preference.id] for c in candidates], len(text.split()))
