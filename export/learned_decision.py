"""The learned decision in each device's format (ONNX, ExecuTorch .pte, Core ML), with parity.

The ONNX model that training writes (the lab's verifier/train.py) is the source of truth: the
ONNX profiles ship it as is, and the ExecuTorch and Core ML programs are traced from the torch
module rebuilt from its weights
(export/onnx_weights.py). Each device folder carries model.json (the source's kind, scale, bias,
threshold and max_length, plus the format and the source file's sha256) and tokenizer.json, so
the learned verifier scores the same way on every runtime.
"""

from __future__ import annotations

import json
import shutil
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.errors import InvalidInputError

from .bundle import sha256_file
from .onnx_weights import decision_module

FORMATS = ("onnx", "executorch", "coreml")
PARITY_LIMIT = 0.02  # max |delta P(Keep)| a device program may differ from the ONNX source
# An int8 program (model.int8.xnnpack.pte, what galaxy-z-flip6 ships) against its fp32 ONNX
# source: on the 3,702 test pairs max |delta P(Keep)| 0.051, mean 0.006, 99.3% of decisions the
# same at 0.7, ROC AUC 0.8836 vs 0.8834 (bench/results/int8_programs.json). (An int8 ONNX
# source, from installs before the shipped decision became fp32, rounds as much: onnxruntime
# against itself with graph optimisations off differed by up to 0.046 on 1,652 test pairs.)
INT8_PROGRAM_LIMIT = 0.06


def _example(token_types: bool, batch: int = 2) -> tuple[Any, ...]:
    import torch

    ids = torch.tensor([[101, 7592, 2088, 102]] * batch, dtype=torch.int64)
    inputs = (ids, torch.ones_like(ids))
    return (*inputs, torch.zeros_like(ids)) if token_types else inputs


def _finish(src: Path, out_dir: Path, meta: dict[str, Any], file: Path,
            facts: dict[str, Any]) -> Path:
    """Tokenizer and model.json next to the device program; returns the program's path."""
    shutil.copyfile(src / "tokenizer.json", out_dir / "tokenizer.json")
    info = {**meta, **facts, "source": "model.onnx",
            "source_sha256": sha256_file(src / "model.onnx")}
    (out_dir / "model.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return file


def _precision(meta: dict[str, Any], precision: str) -> dict[str, Any]:
    """The device program's precision; an int8 source's on-the-fly rounding is emulated."""
    if meta.get("precision") == "int8":
        return {"precision": precision, "emulates": "onnxruntime dynamic int8 (per-tensor "
                "uint8 activations, per-channel int8 weights)", "per_text": True}
    return {"precision": precision}


def export_decision_executorch(src: Path, out_dir: Path, *, delegate: str = "xnnpack",
                               soc: str = "SM8650", base: Any = None, int8: bool = False) -> Path:
    """out_dir/model.<delegate>.pte: batch 1, sequence 2..max_length, fp32 weights (`int8`:
    model.int8.xnnpack.pte, its word table and Linear layers in int8, docs/bundles.md)."""
    from .minilm_executorch import pte_name, qnn_sdk_root, write_program

    if delegate == "qnn":
        qnn_sdk_root()
    module, meta = decision_module(src, base=base)
    pte = write_program(module, out_dir / pte_name(delegate, int8), delegate=delegate,
                        max_length=int(meta.get("max_length", 192)), soc=soc, int8=int8)
    precision = {"precision": "int8", "quantised": "dynamic int8 Linear layers (XNNPACK), "
                 "int8 word table"} if int8 else _precision(meta, "fp32")
    return _finish(Path(src), out_dir, meta, pte, {
        "format": "executorch", "delegate": delegate, "batch": 1, **precision,
        **({"soc": soc} if delegate == "qnn" else {})})


def export_decision_coreml(src: Path, out_dir: Path, *, compute_units: str = "ALL",
                           precision: str = "fp32", base: Any = None) -> Path:
    """out_dir/model.mlpackage (ML program; batch 1..64, sequence 1..max_length, int32)."""
    from .minilm_coreml import COMPUTE_UNITS, MAX_BATCH, PACKAGE_NAME, _import_coremltools

    if compute_units not in COMPUTE_UNITS or precision not in ("fp16", "fp32"):
        raise InvalidInputError(f"compute_units {compute_units!r} / precision {precision!r}; "
                                f"expected one of {COMPUTE_UNITS} / fp16, fp32")
    ct = _import_coremltools()
    import torch

    probe = json.loads((Path(src) / "model.json").read_text("utf-8"))
    token_types = probe.get("kind") != "siamese"  # single texts: all-zero types, dropped
    module, meta = decision_module(src, token_types=token_types, base=base)
    names = ["input_ids", "attention_mask", "token_type_ids"][: 3 if token_types else 2]
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(module, _example(token_types))
        batch = ct.RangeDim(lower_bound=1, upper_bound=MAX_BATCH, default=1)
        seq = ct.RangeDim(lower_bound=1, upper_bound=int(meta.get("max_length", 192)),
                          default=16)
        model = ct.convert(
            traced, inputs=[ct.TensorType(name=n, shape=(batch, seq), dtype=np.int32)
                            for n in names],
            outputs=[ct.TensorType(name="sentence_embedding" if not token_types
                                   else "keep_logit")],
            convert_to="mlprogram", minimum_deployment_target=ct.target.macOS14,
            compute_precision=(ct.precision.FLOAT16 if precision == "fp16"
                               else ct.precision.FLOAT32),
            compute_units=getattr(ct.ComputeUnit, compute_units))
    model.short_description = f"{meta.get('name', 'learned decision')} ({meta.get('kind')})"
    out_dir.mkdir(parents=True, exist_ok=True)
    package, tmp = out_dir / PACKAGE_NAME, out_dir / ("tmp-" + PACKAGE_NAME)
    shutil.rmtree(tmp, ignore_errors=True)
    model.save(str(tmp))
    shutil.rmtree(package, ignore_errors=True)
    tmp.rename(package)
    return _finish(Path(src), out_dir, meta, package, {
        "format": "coreml-mlprogram", **_precision(meta, precision), "compute_units": compute_units,
        "input_dtype": "int32", "inputs": names, "max_batch": MAX_BATCH})


def export_decision(src: Path, out_dir: Path, fmt: str, **options: Any) -> Path:
    """The learned decision of `src` (a folder training wrote) in `fmt` under out_dir."""
    src, out_dir = Path(src), Path(out_dir)
    if fmt == "onnx":
        out_dir.mkdir(parents=True, exist_ok=True)
        for name in ("model.onnx", "model.json", "tokenizer.json"):
            shutil.copyfile(src / name, out_dir / name)
        return out_dir / "model.onnx"
    if fmt == "executorch":
        return export_decision_executorch(src, out_dir, **options)
    if fmt == "coreml":
        return export_decision_coreml(src, out_dir, **options)
    raise InvalidInputError(f"decision format {fmt!r}; expected one of {FORMATS}")


def parity(reference: Any, device: Any, prefs: Sequence[str], passages: Sequence[str],
           threshold: float | None = None) -> dict[str, Any]:
    """max / mean |delta P(Keep)| and decision agreement (at `threshold`, default the
    reference's) of two learned verifiers on (preference, passage) pairs."""
    ref = np.asarray(reference.score_pairs(prefs, passages))
    got = np.asarray(device.score_pairs(prefs, passages))
    delta = np.abs(ref - got)
    threshold = float(reference.threshold if threshold is None else threshold)
    return {"pairs": len(ref), "max_abs_delta": round(float(delta.max()), 5),
            "mean_abs_delta": round(float(delta.mean()), 5),
            "decisions_agree": round(float(np.mean((ref >= threshold) == (got >= threshold))),
                                     4), "threshold": threshold, "limit": PARITY_LIMIT}
