"""Blend a learned verifier with the coarse cosine: logistic weights fitted on out-of-fold scores.

P(Keep) = sigmoid(a * logit(p_learned) + b * cos_coarse + c). For a siamese learner the blend
ships in the same ONNX interface: the model's "sentence_embedding" becomes
[sqrt(w) * fine-tuned vector, sqrt(1 - w) * base vector] (still unit length), so the runtime's
scale * dot + bias is exactly the blend (w = a * scale / (a * scale + b)).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.export.decision_nets import blend_module

from .nets import export_embedding_onnx

EPS = 1e-6


def _features(p_learned: np.ndarray, cos: np.ndarray) -> np.ndarray:
    p = np.clip(np.asarray(p_learned, np.float64), EPS, 1 - EPS)
    return np.column_stack([np.log(p / (1 - p)), np.asarray(cos, np.float64), np.ones(len(p))])


def fit_blend(p_learned: np.ndarray, cos: np.ndarray, labels: np.ndarray,
              l2: float = 1e-3, steps: int = 50) -> tuple[float, float, float]:
    """(a, b, c) of the logistic blend, by Newton's method on the log-loss (lightly ridged)."""
    x, y = _features(p_learned, cos), np.asarray(labels, np.float64)
    w = np.array([1.0, 0.0, 0.0])
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-np.clip(x @ w, -60, 60)))
        grad = x.T @ (p - y) / len(y) + l2 * w
        hess = (x * (p * (1 - p))[:, None]).T @ x / len(y) + l2 * np.eye(3)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-9:
            break
    return float(w[0]), float(w[1]), float(w[2])


def blend_scores(params: tuple[float, float, float], p_learned: np.ndarray,
                 cos: np.ndarray) -> np.ndarray:
    z = _features(p_learned, cos) @ np.asarray(params)
    return 1.0 / (1.0 + np.exp(-np.clip(z, -60, 60)))


def siamese_blend_head(params: tuple[float, float, float], scale: float, bias: float
                       ) -> dict[str, float] | None:
    """The runtime's (scale, bias) and the vector weight w of a siamese blend; None when the
    blend cannot be written as one dot product (a negative weight on either cosine)."""
    a, b, c = params
    fine = a * scale
    if fine <= 0 or b < 0:
        return None
    return {"scale": fine + b, "bias": a * bias + c, "fine_weight": fine / (fine + b)}


def export_siamese_blend_onnx(fine: Any, base: Any, fine_weight: float, out_dir: Path, *,
                              quantize: bool = True, opset: int = 17) -> Path:
    """ONNX of `blend_module`: token ids -> the blend's vector, "sentence_embedding"."""
    return export_embedding_onnx(blend_module(fine, base, fine_weight), Path(out_dir),
                                 quantize=quantize, opset=opset)
