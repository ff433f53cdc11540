"""The three EPIC stages as small, separately testable pieces: filter, verify, steer."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from epic_edge.errors import VerdictError
from epic_edge.protocols import Verifier
from epic_edge.types import Preference, Verdict


def normalize_rows(vectors: np.ndarray) -> np.ndarray:
    """L2-normalise each row (a zero row stays zero)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


@dataclass(frozen=True)
class Candidate:
    """A preference that survived the coarse filter for one item, with its cosine."""

    preference: Preference
    score: float


def coarse_filter(
    item_vectors: np.ndarray,
    preferences: Sequence[Preference],
    preference_vectors: np.ndarray,
    tau: float,
) -> list[list[Candidate]]:
    """P_rel(x) = {p : E(x)·E(p) >= tau}, best first, for every item row.

    An item whose list is empty is dropped without any LLM call.
    """
    n = len(item_vectors)
    if n == 0 or len(preferences) == 0:
        return [[] for _ in range(n)]
    scores = np.asarray(item_vectors, dtype=np.float32) @ preference_vectors.T
    result: list[list[Candidate]] = []
    for row in scores:
        passing = np.flatnonzero(row >= tau)
        order = passing[np.argsort(-row[passing], kind="stable")]
        result.append([Candidate(preferences[j], float(row[j])) for j in order])
    return result


def coarse_drop_reason(item_vector: np.ndarray, preferences: Sequence[Preference],
                       preference_vectors: np.ndarray, tau: float) -> str:
    """Why the coarse filter dropped an item: its closest preference and that similarity."""
    if len(preferences) == 0:
        return "dropped: the memory has no preferences"
    sims = np.asarray(preference_vectors, np.float32) @ np.asarray(item_vector, np.float32)
    best = int(np.argmax(sims))
    return (f"dropped by the coarse filter: the closest preference "
            f"({preferences[best].text[:60]!r}) is at similarity {float(sims[best]):.3f} < tau "
            f"{tau:.3f}; the verifier is not asked")


def fine_verify(verifier: Verifier, item: str, candidates: Sequence[Candidate],
                rescore: Callable[[np.ndarray], np.ndarray] | None = None) -> Verdict:
    """Ask the verifier about one coarse-filter survivor; never called with no candidates.
    `rescore` (the keep score's, epic_edge.keep_score) goes to a verifier that has one.

    The verdict is sanitised: only candidate preferences may be kept, and each kept
    preference must carry a non-empty instruction.
    """
    if not candidates:
        raise ValueError("fine_verify is only for items that passed the coarse filter")
    prefs = [c.preference for c in candidates]
    verdict = (verifier.verify(item, prefs) if rescore is None
               else verifier.verify(item, prefs, rescore=rescore))  # type: ignore[call-arg]
    if not isinstance(verdict.confidence, (int, float)) or not math.isfinite(verdict.confidence):
        raise VerdictError("the verifier's confidence is not a number")  # not judged
    allowed = {p.id for p in prefs}
    kept = [pid for pid in verdict.preference_ids if pid in allowed]
    kept = [pid for pid in dict.fromkeys(kept) if verdict.instructions.get(pid, "").strip()]
    if not verdict.keep or not kept:
        reason = verdict.reason or "verifier kept no candidate preference with an instruction"
        return Verdict.discard(reason, verdict.llm_calls, verdict.confidence, verdict.threshold)
    return Verdict(
        keep=True,
        preference_ids=kept,
        instructions={pid: verdict.instructions[pid].strip() for pid in kept},
        reason=verdict.reason,
        confidence=float(min(max(verdict.confidence, 0.0), 1.0)),
        llm_calls=verdict.llm_calls,
        threshold=verdict.threshold,
    )


_PYTHON_ARGMAX_UP_TO = 64
PAPER_STEER_WEIGHT = 1.0  # q~ = norm(E(q) + E(p*)): the preference pulls as hard as the question
PAPER_STEER_BY = "vector"  # q~ adds the preference's vector to the question's (the paper)
STEER_BY = (PAPER_STEER_BY, "text")  # how a preference steers a question (Steering.by)
# steering by text embeds the question with each preference it leans to by at least this
# weight (Steering.weights), at most TEXT_PREFERENCES of them: each costs one more embedding
TEXT_MIN_WEIGHT = 0.1
TEXT_PREFERENCES = 2


class Steering:
    """Routes a query to its closest preference and steers it: q~ = norm(E(q) + w E(p*)).

    Preference embeddings are given once, normalised and cached here; a query costs one
    (m x d) matrix-vector product, an argmax and one scaled add.
    """

    def __init__(self, preferences: Sequence[Preference], vectors: np.ndarray,
                 hedge: float | None = None,
                 weight: float = PAPER_STEER_WEIGHT, by: str = PAPER_STEER_BY) -> None:
        self.preferences = list(preferences)
        # by = "text": a lookup searches with the question embedded together with the
        # preferences it leans to (search_vector), not with their vectors added (steer)
        if by not in STEER_BY:
            raise ValueError(f"steering by {by!r}: expected one of {', '.join(STEER_BY)}")
        self.by = by
        # hedge = T: steer toward sum_p softmax(E(q)·E(p) / T) E(p) instead of E(p*) alone, so
        # a question between two preferences is not bet on one (None: the paper's argmax)
        self.hedge = hedge
        # weight = w: how hard the preference pulls (1: the paper; 0: the question alone)
        if not weight >= 0.0:
            raise ValueError(f"steering weight must be >= 0, got {weight!r}")
        self.weight = float(weight)
        if len(self.preferences) != len(vectors):
            raise ValueError("one embedding per preference is required")
        vectors = np.asarray(vectors, dtype=np.float32)
        self.vectors = np.ascontiguousarray(normalize_rows(vectors) if len(vectors) else vectors)

    def __len__(self) -> int:
        return len(self.preferences)

    def route(self, query_vector: np.ndarray) -> tuple[Preference | None, float]:
        """p* = argmax_p E(q)·E(p), with its similarity; (None, -1) without preferences."""
        _, preference, similarity = self.steer(query_vector)
        return preference, similarity

    def steer(self, query_vector: np.ndarray, weight: float | None = None
              ) -> tuple[np.ndarray, Preference | None, float]:
        """Return (q~, p*, similarity) for a unit-norm query (every Embedder returns unit rows);
        q~ is the query itself without preferences. `weight` overrides the pull for this query.

        |E(q) + w E(p*)|^2 = 1 + w^2 + 2w E(q)·E(p*) for unit vectors, so the norm comes from
        the similarity already computed.
        """
        q = query_vector
        if not (type(q) is np.ndarray and q.dtype == np.float32 and q.ndim == 1):
            q = np.asarray(q, dtype=np.float32).reshape(-1)  # what an Embedder returns passes
        if not self.preferences:
            return q, None, -1.0
        # one function, few numpy calls: right after an embedding has flushed the CPU caches
        # each call costs microseconds, and for a handful of preferences Python's max over a
        # list beats numpy's argmax and scalar indexing
        sims = self.vectors.dot(q)
        if len(sims) > _PYTHON_ARGMAX_UP_TO:
            best = int(sims.argmax())
            similarity = float(sims[best])
        else:
            values = sims.tolist()
            similarity = max(values)
            best = values.index(similarity)
        w = self.weight if weight is None else weight
        if self.hedge is not None:
            weights = self._softmax(sims, similarity)
            steered = q + weights.dot(self.vectors) * w
            steered *= 1.0 / math.sqrt(float(steered.dot(steered)))
            return steered, self.preferences[best], similarity
        steered = q + self.vectors[best] * w
        steered *= 1.0 / math.sqrt(max(1.0 + w * w + 2.0 * w * similarity, 1e-12))
        return steered, self.preferences[best], similarity

    def search_vector(self, query_vector: np.ndarray, question: str,
                      embed: Callable[[list[str]], np.ndarray]) -> np.ndarray:
        """The vector a steered lookup searches with. By vector: q~ (steer). By text:
        normalise(sum_p w_p E(question + " " + p)) over the preferences the question leans to
        with weight w_p >= TEXT_MIN_WEIGHT (at most TEXT_PREFERENCES, the closest always;
        weights renormalised), so the encoder reads the question in the light of the
        preference instead of averaging two separate meanings."""
        if self.by == PAPER_STEER_BY or not self.preferences:
            return self.steer(query_vector)[0]
        weights = self.weights(query_vector)
        top = np.argsort(-weights, kind="stable")[:TEXT_PREFERENCES]
        top = top[(weights[top] >= TEXT_MIN_WEIGHT) | (top == top[0])]
        mixed = (weights[top] / weights[top].sum()) @ np.asarray(
            embed([f"{question} {self.preferences[i].text}" for i in top]), np.float64)
        return (mixed / max(float(np.linalg.norm(mixed)), 1e-12)).astype(np.float32)

    def weights(self, query_vector: np.ndarray) -> np.ndarray:
        """How much the question leans to each preference, summing to 1: the softmax the
        steering mixes (one-hot on p* without a hedge); empty without preferences."""
        if not self.preferences:
            return np.zeros(0)
        sims = self.vectors.dot(np.asarray(query_vector, np.float32).reshape(-1))
        if self.hedge is not None:
            return self._softmax(sims, float(sims.max()))
        return (np.arange(len(sims)) == int(sims.argmax())).astype(np.float64)

    def _softmax(self, sims: np.ndarray, best: float) -> np.ndarray:
        weights = np.exp((sims - best) * (1.0 / float(self.hedge)))
        return weights / float(weights.sum())
