"""A trained learner kept and shipped: a picklable state, a whole encoder, the ONNX model.

`export` writes what backends/learned_verifier.py loads (a siamese model outputs
"sentence_embedding", a cross-encoder "keep_logit"); `to_state` / `from_state` carry a learner
to and from a training process.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from epic_edge.export.minilm_onnx import _pooled_encoder

from .adapter import adapted_encoder, build_adapter
from .learners import ADAPTER_LENGTH, Trained, Workbench
from .nets import _torch, build_cross_encoder, export_embedding_onnx, export_onnx


def pooled_model(model: Trained, bench: Workbench) -> Any:
    """A siamese or adapter learner as one module: token ids -> its unit vectors."""
    torch = _torch()
    if model.spec.kind == "adapter":
        return adapted_encoder(torch, _pooled_encoder(torch, bench.bert), model.top)
    return _pooled_encoder(torch, full_encoder(model, bench))


def to_state(model: Trained) -> dict[str, Any]:
    """A picklable copy of a trained learner (for training in another process)."""
    head = model.head.state_dict() if hasattr(model.head, "state_dict") else tuple(model.head)
    return {"spec": model.spec, "top": model.top.state_dict(), "head": head,
            "seconds": model.seconds}


def from_state(state: dict[str, Any], bench: Workbench) -> Trained:
    """The learner `to_state` copied, rebuilt over `bench`'s MiniLM."""
    torch, spec = _torch(), state["spec"]
    if spec.kind == "adapter":
        top = build_adapter(torch, bench.bert.config.hidden_size, spec.hidden)
    else:
        top = copy.deepcopy(bench.bert.encoder.layer[spec.frozen:])
    top.load_state_dict(state["top"])
    head = state["head"]
    if spec.kind == "cross-encoder":
        head = torch.nn.Linear(bench.bert.config.hidden_size, 1)
        head.load_state_dict(state["head"])
    return Trained(spec, top.eval(), head, state["seconds"])


def full_encoder(model: Trained, bench: Workbench) -> Any:
    """A copy of MiniLM with the learner's trained top layers in place."""
    bert = copy.deepcopy(bench.bert)
    for i, layer in enumerate(model.top):
        bert.encoder.layer[model.spec.frozen + i] = layer
    return bert.eval()


def export(model: Trained, bench: Workbench, out_dir: Path, quantize: bool = True
           ) -> tuple[Path, dict[str, Any]]:
    """Write out_dir/model.onnx; returns (path, manifest fields the runtime reads)."""
    torch = _torch()
    if model.spec.kind != "cross-encoder":
        scale, bias = (float(t.detach()) for t in model.head)
        path = export_embedding_onnx(pooled_model(model, bench), Path(out_dir),
                                     quantize=quantize)
        return path, {"kind": "siamese", "output": "sentence_embedding", "scale": scale,
                      "bias": bias, "max_length": text_length(model, bench)}
    cross = build_cross_encoder(torch, full_encoder(model, bench))
    cross.head.load_state_dict(model.head.state_dict())
    path = export_onnx(cross, Path(out_dir), quantize=quantize)
    return path, {"kind": "cross-encoder", "output": "keep_logit",
                  "max_length": bench.pair_length}


def text_length(model: Trained, bench: Workbench) -> int:
    """Tokens the runtime should keep per text for this learner's vectors."""
    return ADAPTER_LENGTH if model.spec.kind == "adapter" else bench.text_length
