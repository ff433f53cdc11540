"""The embedder (MiniLM) as a plain PyTorch module for tracing exporters (Core ML, ExecuTorch).

Core ML has no converter for the `new_ones` that transformers' mask helpers emit, and
torch.export trips over their data-dependent branches, so this wrapper calls BERT's embeddings
and encoder directly and builds the additive attention mask itself. Its output is the same
mean-pooled, L2-normalised sentence embedding as the ONNX export.
"""

from __future__ import annotations

from typing import Any

from epic_edge.export.minilm_onnx import _import_export_deps

MASK_VALUE = -1.0e4  # additive mask; finite so fp16 programs stay finite


def explicit_mask_encoder(encoder: Any, *, token_types: bool = True,
                          normalize: bool = True) -> Any:
    """Return an eval-mode module over `encoder` (a BertModel, load_minilm_encoder's):
    (input_ids, attention_mask[, token_type_ids]) -> (n, dim).

    `token_types=False` drops the third input (all zeros for single sentences) for runtimes
    where fewer inputs are cheaper (Core ML); `normalize=False` keeps the plain mean (what the
    learned cross-encoder's head reads).
    """
    torch, _ = _import_export_deps()

    class ExplicitMaskEncoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = encoder

        def _pooled(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            hidden = self.bert.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
            keep = attention_mask.to(hidden.dtype)
            additive = (1.0 - keep)[:, None, None, :] * MASK_VALUE
            out = self.bert.encoder(hidden, attention_mask=additive)
            hidden = out[0] if isinstance(out, tuple) else out.last_hidden_state
            weights = keep.unsqueeze(-1)
            summed = (hidden * weights).sum(dim=1)
            counts = weights.sum(dim=1).clamp(min=1e-9)
            mean = summed / counts
            return torch.nn.functional.normalize(mean, p=2.0, dim=1) if normalize else mean

    if token_types:

        class WithTypes(ExplicitMaskEncoder):
            def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
                return self._pooled(input_ids, attention_mask, token_type_ids)

        return WithTypes().eval()

    class WithoutTypes(ExplicitMaskEncoder):
        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            return self._pooled(input_ids, attention_mask, torch.zeros_like(input_ids))

    return WithoutTypes().eval()
