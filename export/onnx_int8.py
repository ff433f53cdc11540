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
    tmp.replace(out_path)
    meta_path = fp32_model.with_name("model.json")
    if meta_path.is_file() and out_path.parent == fp32_model.parent:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        meta["int8"] = {"file": out_path.name, "per_channel": per_channel,
                        "weight_type": "QInt8", "method": "onnxruntime quantize_dynamic"}
        meta_path.write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return out_path


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
