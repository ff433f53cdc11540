"""A siamese learner that trains no transformer layer: a residual adapter on MiniLM's vectors.

v' = normalise(v + B relu(A v)) (B starts at zero, so training starts from the coarse cosine),
P(Keep) = sigmoid(scale * v'(p) . v'(x) + bias). It trains on the coarse vectors the study
computes anyway, in seconds, so it can afford many epochs, folds and mined negatives where
fine-tuning MiniLM's layers takes minutes per fold on two shared cores. It ships as MiniLM +
adapter in one ONNX with the embedder's interface ("sentence_embedding", 384 values).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from epic_edge_lab.calibrate import LabelledPair

from .nets import _torch


def build_adapter(torch: Any, dim: int, hidden: int) -> Any:
    class Adapter(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.down = torch.nn.Linear(dim, hidden)
            self.up = torch.nn.Linear(hidden, dim)
            torch.nn.init.zeros_(self.up.weight)
            torch.nn.init.zeros_(self.up.bias)
            self.drop = torch.nn.Dropout(0.1)

        def forward(self, vectors: Any) -> Any:
            out = vectors + self.up(self.drop(torch.relu(self.down(vectors))))
            return torch.nn.functional.normalize(out, dim=-1)

    return Adapter()


def _stack(torch: Any, vectors: dict[str, np.ndarray], texts: Sequence[str]) -> Any:
    return torch.from_numpy(np.stack([vectors[t] for t in texts]).astype(np.float32))


def fit_adapter(pairs: Sequence[LabelledPair], vectors: dict[str, np.ndarray], *, hidden: int,
                epochs: int, lr: float, batch_size: int, seed: int) -> tuple[Any, Any]:
    """(adapter, (scale, bias)) trained with BCE on the pairs' coarse vectors."""
    torch = _torch()
    torch.manual_seed(seed)
    dim = len(next(iter(vectors.values())))
    adapter = build_adapter(torch, dim, hidden)
    scale, bias = torch.nn.Parameter(torch.tensor(10.0)), torch.nn.Parameter(torch.tensor(-3.3))
    u = _stack(torch, vectors, [p.preference for p in pairs])
    v = _stack(torch, vectors, [p.passage for p in pairs])
    y = torch.tensor([p.keep for p in pairs], dtype=torch.float)
    pos_weight = (1 - y).sum() / y.sum().clamp(min=1)
    opt = torch.optim.AdamW([*adapter.parameters(), scale, bias], lr=lr, weight_decay=0.01)
    rng = np.random.default_rng(seed)
    adapter.train()
    for _ in range(epochs):
        for idx in np.array_split(rng.permutation(len(pairs)),
                                  max(1, -(-len(pairs) // batch_size))):
            logits = scale * (adapter(u[idx]) * adapter(v[idx])).sum(1) + bias
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                logits, y[idx], pos_weight=pos_weight)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return adapter.eval(), (scale.detach(), bias.detach())


def adapter_logits(adapter: Any, head: Any, vectors: dict[str, np.ndarray],
                   pairs: Sequence[LabelledPair]) -> Any:
    torch = _torch()
    with torch.no_grad():
        u = adapter(_stack(torch, vectors, [p.preference for p in pairs]))
        v = adapter(_stack(torch, vectors, [p.passage for p in pairs]))
        return head[0] * (u * v).sum(1) + head[1]


def adapted_encoder(torch: Any, pooled_encoder: Any, adapter: Any) -> Any:
    """(input_ids, attention_mask, token_type_ids) -> the adapter's vector of MiniLM's vector."""

    class Adapted(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder, self.adapter = pooled_encoder, adapter

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.adapter(self.encoder(input_ids, attention_mask, token_type_ids))

    return Adapted().eval()
