"""The question gate: P(no preference bears on a question), read from the question alone.

The memory-use gate (epic_edge.retrieval) asks whether a question lands near a preference or a
kept entry. A person's own lookups ("When's the plumber coming?", "What's the wifi password at
Mum's?") land near both, because the stream holds their answers, yet no preference bears on
them. What sets them apart is what the question asks for: a fact or a chore, not a choice a
taste, a limit or a rule could change. The question gate is a logistic model over the embedder's
unit vector of the question and hashed counts of its words (its first one, two and three words,
and each word: "remind me to", "how do i"), trained by the lab (`epic-edge-lab
train-question-gate`) on labelled everyday questions, and calibrated so that its output is a
probability. A lookup withholds memory when P(no preference bears) reaches `threshold` and the
question's closest preference is below the profile's `question_gate_below`, whatever the other
evidence (epic_edge.retrieval.question_withholds; docs/personal-stream.md has how it was chosen
and what it costs).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from epic_edge.calibrated import CalibratedScore

WORD = re.compile(r"[^\W\d_]+")  # runs of letters, any script


def word_features(text: str, buckets: int) -> np.ndarray:
    """Hashed counts (CRC-32 modulo `buckets`) of a text's first one, two and three words and
    of each of its words, lowercased, divided by the square root of their number."""
    words = WORD.findall(text.lower())
    tokens = ([f"w1:{words[0]}", "w2:" + " ".join(words[:2]), "w3:" + " ".join(words[:3])]
              if words else []) + [f"u:{word}" for word in words]
    out = np.zeros(buckets)
    for token in tokens:
        out[zlib.crc32(token.encode("utf-8")) % buckets] += 1.0
    return out / np.sqrt(max(len(tokens), 1))


def gate_features(question_vectors: np.ndarray, texts: str | Sequence[str], buckets: int,
                  scale: float) -> np.ndarray:
    """One row per question: its unit vector, then `scale` x word_features (none at 0
    buckets). A single vector and text give one row."""
    q = np.atleast_2d(np.asarray(question_vectors, np.float64))
    texts = [texts] if isinstance(texts, str) else list(texts)
    if len(texts) != len(q):
        raise ValueError(f"{len(q)} question vectors but {len(texts)} texts")
    if not buckets:
        return q
    return np.hstack([q, scale * np.array([word_features(t, buckets) for t in texts])])


@dataclass(frozen=True)
class QuestionGate(CalibratedScore):
    """P(no preference bears) = sigmoid(slope * (features . weights + bias) + offset) of
    gate_features; memory is withheld at >= threshold."""

    buckets: int = 0
    word_scale: float = 0.0
    WHAT = "question gate"
    FEATURES = "the question's unit vector, then word_scale x its hashed word counts"

    @classmethod
    def options_of(cls, data: dict[str, Any]) -> dict[str, Any]:
        words = data.get("words") or {}
        return {"buckets": int(words.get("buckets", 0)), "word_scale": float(words.get("scale", 0))}

    def to_dict(self) -> dict[str, object]:
        return {**super().to_dict(), "words": {"buckets": self.buckets, "scale": self.word_scale}}

    def probability(self, question_vectors: np.ndarray, texts: str | Sequence[str]
                    ) -> np.ndarray:
        """P(no preference bears) of each question (its vector and its text); one value for
        one question."""
        p = self.probabilities(gate_features(question_vectors, texts, self.buckets,
                                             self.word_scale))
        return p[0] if isinstance(texts, str) else p
