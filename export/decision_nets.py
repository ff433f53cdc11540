"""The learned decision's networks, shared by the lab's training and the device export: the
cross-encoder and the siamese blend, rebuilt around a MiniLM encoder."""

from __future__ import annotations

import math
from typing import Any

from epic_edge.optional import optional_import


def build_cross_encoder(torch: Any, encoder: Any) -> Any:
    """MiniLM over "[CLS] preference [SEP] passage [SEP]", mean-pooled, one Keep logit."""

    class CrossEncoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder
            self.head = torch.nn.Linear(encoder.config.hidden_size, 1)

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask,
                                  token_type_ids=token_type_ids, return_dict=False)[0]
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            return self.head(pooled).squeeze(-1)

    return CrossEncoder()


def blend_module(fine: Any, base: Any, fine_weight: float, *, token_types: bool = True) -> Any:
    """token ids -> [sqrt(w) fine vector, sqrt(1 - w) base vector] (`fine` and `base`: modules
    from token ids to unit vectors); forward names its inputs, as torch.export's dynamic shapes
    need, and `token_types=False` drops the third (for Core ML)."""
    torch = optional_import("torch", "export", "the learned decision's networks")
    weights = (math.sqrt(fine_weight), math.sqrt(1.0 - fine_weight))

    class Blend(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fine, self.base = fine, base

        def _blend(self, *inputs: Any) -> Any:
            return torch.cat([weights[0] * self.fine(*inputs), weights[1] * self.base(*inputs)],
                             1)

    class WithTypes(Blend):
        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self._blend(input_ids, attention_mask, token_type_ids)

    class WithoutTypes(Blend):
        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            return self._blend(input_ids, attention_mask)

    return WithTypes() if token_types else WithoutTypes()
