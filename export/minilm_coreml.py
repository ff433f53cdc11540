"""Embedder -> Core ML .mlpackage (ML program, fp16): converts on Linux, predicts on macOS only."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

from epic_edge.errors import InvalidInputError
from epic_edge.export.minilm_onnx import (
    DIM,
    MAX_LENGTH,
    MODEL_NAME,
    embedder_weights,
    load_minilm_encoder,
    same_weights,
    weights_sha256,
)
from epic_edge.export.torch_encoder import explicit_mask_encoder
from epic_edge.optional import optional_import
from epic_edge.registry import COMPUTE_UNITS

PACKAGE_NAME = "model.mlpackage"
INPUTS = ("input_ids", "attention_mask")
OUTPUT = "sentence_embedding"
MAX_BATCH = 64


def _import_coremltools() -> Any:
    return optional_import("coremltools", "export", "the Core ML export")


def export_coreml(out_dir: Path, *, compute_units: str = "CPU_AND_NE", precision: str = "fp16",
                  max_length: int = MAX_LENGTH, force: bool = False) -> Path:
    """Write out_dir/{model.mlpackage, tokenizer.json, model.json}; return the package path.

    The traced module builds BERT's attention mask itself (coremltools cannot convert the
    `new_ones` of transformers' mask helpers); both input dims are flexible (RangeDim).
    """
    if compute_units not in COMPUTE_UNITS:
        raise InvalidInputError(f"compute_units {compute_units!r}; expected one of {COMPUTE_UNITS}")
    if precision not in ("fp16", "fp32"):
        raise InvalidInputError(f"precision {precision!r}; expected fp16 or fp32")
    out_dir = Path(out_dir)
    package = out_dir / PACKAGE_NAME
    weights = embedder_weights()
    digest = weights_sha256(weights)
    if not force and package.is_dir() and same_weights(out_dir / "model.json", digest):
        return package
    ct = _import_coremltools()
    import numpy as np
    import torch

    module = explicit_mask_encoder(load_minilm_encoder(weights), token_types=False)
    ids = torch.tensor([[101, 7592, 2088, 102], [101, 7592, 102, 0]], dtype=torch.int64)
    mask = (ids != 0).to(torch.int64)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(module, (ids, mask))
    batch = ct.RangeDim(lower_bound=1, upper_bound=MAX_BATCH, default=1)
    seq = ct.RangeDim(lower_bound=1, upper_bound=int(max_length), default=16)
    inputs = [ct.TensorType(name=n, shape=(batch, seq), dtype=np.int32) for n in INPUTS]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # overflow notes from constant folding of the mask
        model = ct.convert(
            traced, inputs=inputs, outputs=[ct.TensorType(name=OUTPUT)],
            convert_to="mlprogram", minimum_deployment_target=ct.target.macOS14,
            compute_precision=(ct.precision.FLOAT16 if precision == "fp16"
                               else ct.precision.FLOAT32),
            compute_units=getattr(ct.ComputeUnit, compute_units),
        )
    model.short_description = f"{MODEL_NAME} mean-pooled, L2-normalised sentence embedding"
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / ("tmp-" + PACKAGE_NAME)
    shutil.rmtree(tmp, ignore_errors=True)
    model.save(str(tmp))
    shutil.rmtree(package, ignore_errors=True)
    tmp.rename(package)
    shutil.copyfile(weights / "tokenizer.json", out_dir / "tokenizer.json")
    meta = {"name": MODEL_NAME, "weights_sha256": digest, "dim": DIM,
            "pooling": "mean", "normalize": True,
            "max_length": int(max_length), "precision": precision, "format": "coreml-mlprogram",
            "inputs": list(INPUTS), "input_dtype": "int32", "output": OUTPUT,
            "compute_units": compute_units, "max_batch": MAX_BATCH}
    (out_dir / "model.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return package


def coreml_signature(package: Path) -> dict[str, Any]:
    """Inputs (name, dtype, shape range) and outputs of a saved .mlpackage, read on any OS."""
    ct = _import_coremltools()
    spec = ct.utils.load_spec(str(package))
    kinds = {65552: "float16", 65568: "float32", 65600: "float64", 131104: "int32"}

    def describe(feature: Any) -> dict[str, Any]:
        arr = feature.type.multiArrayType
        ranges = [(r.lowerBound, r.upperBound) for r in arr.shapeRange.sizeRanges]
        return {"name": feature.name, "dtype": kinds.get(arr.dataType, str(arr.dataType)),
                "shape_range": ranges}

    return {"type": spec.WhichOneof("Type"),
            "spec_version": spec.specificationVersion,
            "inputs": [describe(f) for f in spec.description.input],
            "outputs": [describe(f) for f in spec.description.output]}
