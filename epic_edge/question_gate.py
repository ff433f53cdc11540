"""The question gate: P(no preference bears on a question), read from the question alone.

The memory-use gate (epic_edge.retrieval) asks whether a question lands near a preference or a
kept entry. A person's own lookups ("When's the plumber coming?", "What's the wifi password at
Mum's?") land near both, because the stream holds their answers, yet no preference bears on
them. What sets them apart is what the question asks for: a fact or a chore, not a choice a
taste, a limit or a rule could change. The question gate is a logistic model over the embedder's
unit vector of the question, trained by the lab (`epic-edge-lab train-question-gate`) on
labelled everyday questions, and calibrated so that its output is a probability. A lookup
withholds memory when P(no preference bears) reaches `threshold`, whatever the other evidence
(docs/personal-stream.md has how it was chosen and what it costs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from epic_edge.calibrated import CalibratedScore


@dataclass(frozen=True)
class QuestionGate(CalibratedScore):
    """P(no preference bears) = sigmoid(slope * (q . weights + bias) + offset) of the question's
    unit vector q; memory is withheld at >= threshold."""

    WHAT = "question gate"
    FEATURES = "the question's unit vector"

    def probability(self, question_vectors: np.ndarray) -> np.ndarray:
        """P(no preference bears) of each question vector (a scalar array for one vector)."""
        return self.probabilities(question_vectors)
