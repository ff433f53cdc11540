"""Train the keep score (epic_edge.keep_score) on the personal set's dev personas.

Recipe (docs/personal-stream.md, the study's two logistics without the item kind and the
stream state the API does not have): a logistic on the four scalars (L2, C=1) and one on every
feature (C=0.01), each standardised, summed and folded into one linear score; a Platt fit on
scores cross-fitted over five persona folds makes it a probability; the keep threshold is the
probability at which those cross-fitted scores reach the target item recall.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from epic_edge.keep_score import SCALARS, KeepScore, pair_features
from epic_edge_lab.personal_data import Persona

FOLDS = 5


@dataclass
class Pairs:
    """Every (item, preference) pair of some personas, with its features and label."""

    x: np.ndarray
    y: np.ndarray
    item: np.ndarray  # a global item number per pair
    persona: np.ndarray  # the persona's position per pair
    item_label: np.ndarray  # 1 when the item bears on some preference

    @property
    def cosine(self) -> np.ndarray:
        """Each pair's coarse cosine (a feature column)."""
        return self.x[:, SCALARS.index("cosine")]


def pairs(personas: list[Persona], embedder: Any, verifier: Any) -> Pairs:
    """Features of every pair, as ingest computes them (embedder vectors, P(Keep))."""
    return pairs_of(personas, vectors(personas, embedder), decisions(personas, verifier))


def vectors(personas: list[Persona], embedder: Any) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per persona, the embedder's vectors of its items and of its preferences."""
    return [(embedder.embed(_texts(persona)), embedder.embed(list(persona.preferences.values())))
            for persona in personas]


def decisions(personas: list[Persona], verifier: Any) -> list[list[np.ndarray]]:
    """Per persona and item, the decision's P(Keep) of the item for each preference."""
    out = []
    for persona in personas:
        prefs = list(persona.preferences.values())
        out.append([verifier.score_pairs(prefs, [text] * len(prefs))
                    for text in _texts(persona)])
    return out


def pairs_of(personas: list[Persona], vectors: list[tuple[np.ndarray, np.ndarray]],
             decisions: list[list[np.ndarray]]) -> Pairs:
    """Every pair's features from given vectors and P(Keep), with its label."""
    rows, ys, item_no, who, labels = [], [], [], [], []
    for n, (persona, (items, pv), p_keeps) in enumerate(zip(personas, vectors, decisions)):
        prefs = list(persona.preferences)
        for item, text, vector, p_keep in zip(persona.items, _texts(persona), items, p_keeps):
            rows.append(pair_features(vector, pv, p_keep, len(text.split())))
            bears = persona.bears_on.get(item["id"], frozenset())
            ys += [int(p in bears) for p in prefs]
            item_no += [len(labels)] * len(prefs)
            who += [n] * len(prefs)
            labels.append(int(bool(bears)))
    return Pairs(np.vstack(rows), np.array(ys), np.array(item_no), np.array(who),
                 np.array(labels))


def _texts(persona: Persona) -> list[str]:
    return [" ".join(item["text"].split()) for item in persona.items]


def logistic(x: np.ndarray, y: np.ndarray, c: float, steps: int = 30) -> tuple[np.ndarray, float]:
    """L2-penalised logistic regression (penalty |w|^2 / 2c, bias free) by Newton steps."""
    a = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(a.shape[1])
    ridge = np.full(a.shape[1], 1.0 / c)
    ridge[-1] = 1e-8
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-np.clip(a @ w, -30, 30)))
        grad = a.T @ (p - y) + ridge * w
        hess = (a * (p * (1 - p))[:, None]).T @ a + np.diag(ridge)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-7:
            break
    return w[:-1], float(w[-1])


def linear_score(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """The two standardised logistics summed, as one (weights, bias) over raw features."""
    mean, std = x.mean(0), x.std(0)
    live = std > 1e-6  # a few of MiniLM's dimensions are constant: they carry nothing
    std = np.where(live, std, 1.0)
    z = np.where(live, (x - mean) / std, 0.0)
    weights, bias = np.zeros(x.shape[1]), 0.0
    for cols, c in ((slice(0, len(SCALARS)), 1.0), (slice(None), 0.01)):
        w_full = np.zeros(x.shape[1])
        w, b = logistic(z[:, cols], y, c)
        w_full[cols] = w
        s = z @ w_full + b
        w_full /= s.std()
        weights += w_full
        bias += (b - s.mean()) / s.std()
    return weights / std, bias - float((weights / std) @ mean)


def cross_fitted(data: Pairs) -> np.ndarray:
    """Each pair's raw score from a model fit without its persona's fold."""
    fold = data.persona % FOLDS
    out = np.zeros(len(data.y))
    for f in range(FOLDS):
        w, b = linear_score(data.x[fold != f], data.y[fold != f])
        out[fold == f] = data.x[fold == f] @ w + b
    return out


def item_scores(data: Pairs, scores: np.ndarray, tau: float) -> np.ndarray:
    """Each item's best score over the preferences that pass the coarse filter (-inf: none)."""
    gated = np.where(data.cosine >= tau, scores, -np.inf)
    out = np.full(len(data.item_label), -np.inf)
    np.maximum.at(out, data.item, gated)
    return out


def threshold_at_recall(labels: np.ndarray, scores: np.ndarray, recall: float) -> float:
    """The highest score at which the items scoring at least it hold `recall` of the bearing."""
    order = np.argsort(-scores, kind="mergesort")
    hits = np.cumsum(labels[order])
    return float(scores[order][min(np.searchsorted(hits, recall * labels.sum()), len(order) - 1)])


def train(data: Pairs, tau: float, recall: float, trained_on: str) -> tuple[KeepScore, dict]:
    """Fit on all of `data`; calibrate and set the threshold from its cross-fitted scores."""
    held = cross_fitted(data)
    slope, offset = logistic(held[:, None], data.y, 1e6)
    weights, bias = linear_score(data.x, data.y)
    prob = 1.0 / (1.0 + np.exp(-(slope[0] * held + offset)))
    items = item_scores(data, prob, tau)
    threshold = threshold_at_recall(data.item_label, items, recall)
    kept = items >= threshold
    report = {"pairs": int(len(data.y)), "bearing_pairs": int(data.y.sum()),
              "items": int(len(items)), "bearing_items": int(data.item_label.sum()),
              "pair_auc_cross_fitted": auc(data.y, held),
              "pair_auc_cosine": auc(data.y, data.cosine),
              "pair_auc_decision": auc(data.y, data.x[:, SCALARS.index("decision_logit")]),
              "item_recall_cross_fitted": float(kept[data.item_label == 1].mean()),
              "item_precision_cross_fitted": float(data.item_label[kept].mean()),
              "threshold": threshold}
    return KeepScore(weights, bias, float(slope[0]), offset, threshold, trained_on), report


def auc(y: np.ndarray, s: np.ndarray) -> float:
    """ROC AUC (ties count half)."""
    y, s = np.asarray(y), np.asarray(s, np.float64)
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s))
    ranks[order] = np.arange(1, len(s) + 1)
    for value in np.unique(s[np.r_[False, np.diff(s[order]) == 0]] if len(s) else []):
        ranks[s == value] = ranks[s == value].mean()
    n1, n0 = y.sum(), len(y) - y.sum()
    return float((ranks[y == 1].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))
