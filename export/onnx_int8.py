"""Dynamic int8 quantisation of the ONNX embedder, and its agreement with the fp32 model."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.errors import ModelNotFoundError
from epic_edge.optional import optional_import

INT8_NAME = "model.int8.onnx"
# How the int8 weights are stored: as uint8, each shifted by +128 with its zero point, so that
# (w + 128) - (zp + 128) is the same integer. ONNX Runtime then runs its u8 x u8 kernels, whose
# integer sums are exact on every CPU; its u8 x s8 kernels on x86 without VNNI add products in
# pairs into 16 bits, which saturate, so the same file embedded differently on an AVX2 machine
# than on a VNNI one (docs/personal-stream.md).
WEIGHT_STORAGE = "int8 + 128 as uint8"
# Real sentences of the kinds a memory sees, for the agreement check.
CHECK_SENTENCES = (
    "I'm vegan, so please never suggest dishes with meat, fish, eggs or dairy.",
    "The steakhouse on Fifth Street serves dry-aged ribeye and bone marrow butter.",
    "How do I get from Kyoto Station to Fushimi Inari by train?",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "My daughter is allergic to peanuts.",
    "Quarterly revenue grew 12% year over year, driven by subscriptions.",
    "The Ford F-150 has been the best-selling pickup truck in America for decades.",
    "I only buy clothes made from organic cotton or recycled fibres.",
    "The Legend of Zelda: Breath of the Wild is an open-world action-adventure game.",
    "Golden retrievers are friendly, intelligent dogs that need daily exercise.",
)


def quantize_int8(fp32_model: Path, out_path: Path | None = None, *,
                  per_channel: bool = True) -> Path:
    """Write a dynamic-int8 copy of `fp32_model` (weights int8, activations quantised at run time).

    per_channel=True keeps one scale per output channel; the per-tensor default of ONNX Runtime
    loses noticeably more agreement with fp32 on MiniLM (tests/test_export_bundle.py,
    test_per_tensor_int8_agrees_less).
    """
    quantization = optional_import("onnxruntime.quantization", "export", "int8 quantisation")
    QuantType, quantize_dynamic = quantization.QuantType, quantization.quantize_dynamic
    fp32_model = Path(fp32_model)
    if not fp32_model.is_file():
        raise ModelNotFoundError(f"fp32 ONNX model {fp32_model} not found; export it first")
    out_path = Path(out_path) if out_path else fp32_model.with_name(INT8_NAME)
    tmp = out_path.with_name(out_path.name + ".tmp")
    quantize_dynamic(str(fp32_model), str(tmp), per_channel=per_channel,
                     weight_type=QuantType.QInt8)
    unsigned_weights(tmp)
    tmp.replace(out_path)
    meta_path = fp32_model.with_name("model.json")
    if meta_path.is_file() and out_path.parent == fp32_model.parent:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        meta["int8"] = {"file": out_path.name, "per_channel": per_channel,
                        "weight_type": "QInt8", "stored": WEIGHT_STORAGE,
                        "method": "onnxruntime quantize_dynamic"}
        meta_path.write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return out_path


def unsigned_weights(model_path: Path) -> int:
    """Store the int8 weights of every MatMulInteger in `model_path` as uint8 (WEIGHT_STORAGE),
    in place; the integer products are unchanged. Returns how many tensors were shifted."""
    onnx = optional_import("onnx", "export", "int8 quantisation")
    numpy_helper = optional_import("onnx.numpy_helper", "export", "int8 quantisation")
    model = onnx.load(str(model_path))
    graph = model.graph
    tensors = {t.name: t for t in graph.initializer}
    users: dict[str, set[str]] = {}
    for node in graph.node:
        for name in node.input:
            users.setdefault(name, set()).add(node.op_type)
    shifted = 0
    for node in graph.node:
        if node.op_type != "MatMulInteger" or len(node.input) < 4:
            continue
        for name in (node.input[1], node.input[3]):
            tensor = tensors.get(name)
            if tensor is None or tensor.data_type != onnx.TensorProto.INT8:
                continue
            if users[name] != {"MatMulInteger"}:
                raise ValueError(f"int8 weight {name} also feeds {sorted(users[name])}")
            values = numpy_helper.to_array(tensor).astype(np.int16) + 128
            tensor.CopyFrom(numpy_helper.from_array(values.astype(np.uint8), name))
            shifted += 1
    onnx.save(model, str(model_path))
    return shifted


def _embed(ort: Any, tokenizer: Any, model: Path, texts: Sequence[str]) -> np.ndarray:
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    rows = []
    for enc in tokenizer.encode_batch(list(texts)):
        ids = np.asarray([enc.ids], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids),
                "token_type_ids": np.zeros_like(ids)}
        rows.append(session.run(None, feed)[0][0])
    out = np.asarray(rows, dtype=np.float32)
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


def agreement(reference_model: Path, other_model: Path, tokenizer_path: Path,
              texts: Sequence[str] = CHECK_SENTENCES) -> dict[str, float]:
    """Cosine between the two models' embeddings of `texts`: min and mean."""
    ort = optional_import("onnxruntime", "cpu", "the int8 agreement check")
    tokenizers = optional_import("tokenizers", "cpu", "the int8 agreement check")
    tok = tokenizers.Tokenizer.from_file(str(tokenizer_path))
    tok.no_padding()
    tok.enable_truncation(max_length=256)
    a = _embed(ort, tok, Path(reference_model), texts)
    b = _embed(ort, tok, Path(other_model), texts)
    cos = (a * b).sum(axis=1)
    return {"min_cosine": float(cos.min()), "mean_cosine": float(cos.mean()), "n": len(texts)}
