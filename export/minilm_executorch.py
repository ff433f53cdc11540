"""Embedder -> ExecuTorch .pte: XNNPACK delegate (any CPU) or QNN (needs the Qualcomm SDK)."""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path
from typing import Any

from epic_edge.errors import InvalidInputError, ModelNotFoundError
from epic_edge.export.minilm_onnx import (
    DIM,
    INPUT_NAMES,
    MAX_LENGTH,
    MODEL_NAME,
    embedder_weights,
    load_minilm_encoder,
    same_weights,
    weights_sha256,
)
from epic_edge.export.torch_encoder import explicit_mask_encoder
from epic_edge.optional import optional_import

DELEGATES = ("xnnpack", "qnn")
QNN_ENV = "QNN_SDK_ROOT"
# Snapdragon 8 Gen 3 (Galaxy Z Flip6) is SM8650.
DEFAULT_SOC = "SM8650"


def pte_name(delegate: str, int8: bool = False) -> str:
    """model.xnnpack.pte, or model.int8.xnnpack.pte for a program in dynamic int8."""
    return f"model.{'int8.' if int8 else ''}{delegate}.pte"


def is_int8_program(path: str | Path) -> bool:
    """Whether a profile's .pte path names an int8 program (pte_name)."""
    return Path(path).name.startswith("model.int8.")


def _import_executorch() -> Any:
    return optional_import("executorch.exir", "export", "the ExecuTorch export")


def qnn_sdk_root() -> Path:
    """The Qualcomm AI Engine Direct SDK folder from $QNN_SDK_ROOT, or a clear error.

    Checked before anything of executorch's Qualcomm backend is imported: that import fetches
    the SDK from the internet when it finds none, and epic-edge never goes online silently.
    """
    value = os.environ.get(QNN_ENV, "")
    if not value:
        raise ModelNotFoundError(
            f"the QNN delegate needs the Qualcomm AI Engine Direct (QNN) SDK: set {QNN_ENV} to "
            "its folder (from Qualcomm's developer site); epic-edge will not download it")
    root = Path(value).expanduser()
    if not root.is_dir():
        raise ModelNotFoundError(f"{QNN_ENV}={value} is not an existing folder; point it at "
                                 "the unpacked Qualcomm AI Engine Direct (QNN) SDK")
    return root


def _partitioners(delegate: str, soc: str, example: tuple[Any, ...]) -> list[Any]:
    if delegate == "xnnpack":
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        return [XnnpackPartitioner()]
    qnn_sdk_root()  # raises before the Qualcomm backend is imported
    from executorch.backends.qualcomm.partition.qnn_partitioner import (  # pragma: no cover
        QnnPartitioner,
    )
    from executorch.backends.qualcomm.utils.utils import (  # pragma: no cover
        generate_htp_compiler_spec,
        generate_qnn_executorch_compiler_spec,
        get_soc_to_chipset_map,
    )

    spec = generate_qnn_executorch_compiler_spec(  # pragma: no cover
        soc_model=get_soc_to_chipset_map()[soc],
        backend_options=generate_htp_compiler_spec(use_fp16=True))
    return [QnnPartitioner(spec)]  # pragma: no cover


def int8_word_embeddings(module: Any, min_rows: int = 1000) -> None:
    """Replace each large nn.Embedding of `module` (MiniLM's 30,522 x 384 word table, half
    the program) by int8 rows with one fp32 scale each, dequantised as they are looked up."""
    import torch

    class Int8Embedding(torch.nn.Module):
        def __init__(self, weight: Any) -> None:
            super().__init__()
            scale = weight.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / 127.0
            self.register_buffer("rows", torch.round(weight / scale).to(torch.int8))
            self.register_buffer("scale", scale.to(torch.float32))

        def forward(self, ids: Any) -> Any:
            return self.rows[ids].to(torch.float32) * self.scale[ids]

    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, torch.nn.Embedding) and child.num_embeddings >= min_rows:
                setattr(parent, name, Int8Embedding(child.weight.detach()))


def quantized_int8(module: Any, example: tuple[Any, ...], dynamic: dict[str, Any]) -> Any:
    """`module` with every Linear in XNNPACK's dynamic int8 (per-channel int8 weights,
    activations quantised per run), as ONNX Runtime's quantize_dynamic does the int8 ONNX
    embedder: about a quarter of the fp32 program's bytes."""
    import torch
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    int8_word_embeddings(module)
    quantizer = XNNPACKQuantizer().set_global(
        get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True))
    graph = torch.export.export(module, example, dynamic_shapes=dynamic, strict=False).module()
    prepared = prepare_pt2e(graph, quantizer)
    prepared(*example)  # dynamic: no calibration data needed, one run sets the observers up
    return convert_pt2e(prepared)


def write_program(module: Any, pte: Path, *, delegate: str, max_length: int,
                  soc: str = DEFAULT_SOC, int8: bool = False) -> Path:
    """Lower `module` ((ids, mask, types) of batch 1, sequence 2..max_length) to `pte`;
    `int8`: its Linear layers in dynamic int8 first (XNNPACK only)."""
    exir = _import_executorch()
    import torch

    ids = torch.tensor([[101, 7592, 2088, 102]], dtype=torch.int64)
    example = (ids, torch.ones_like(ids), torch.zeros_like(ids))
    seq = torch.export.Dim("sequence", min=2, max=int(max_length))
    dynamic = {name: {1: seq} for name in INPUT_NAMES}
    if int8 and delegate != "xnnpack":
        raise InvalidInputError("int8 programs are written for the xnnpack delegate only")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if int8:
            module = quantized_int8(module, example, dynamic)
        program = torch.export.export(module, example, dynamic_shapes=dynamic, strict=False)
        edge = exir.to_edge_transform_and_lower(
            program, partitioner=_partitioners(delegate, soc, example))
        buffer = edge.to_executorch().buffer
    pte.parent.mkdir(parents=True, exist_ok=True)
    tmp = pte.with_name(pte.name + ".tmp")
    tmp.write_bytes(buffer)
    tmp.replace(pte)
    return pte


def export_executorch(out_dir: Path, *, delegate: str = "xnnpack", max_length: int = MAX_LENGTH,
                      soc: str = DEFAULT_SOC, force: bool = False, int8: bool = False) -> Path:
    """Write out_dir/{model.<delegate>.pte, tokenizer.json, model.json}; return the .pte path
    (`int8`: model.int8.xnnpack.pte, its word table and Linear layers in int8).

    Batch is fixed at 1 and the sequence length is dynamic (2..max_length): XNNPACK's reshape
    takes one dynamic dimension only; the runtime embeds a batch one text at a time.
    """
    if delegate not in DELEGATES:
        raise InvalidInputError(f"delegate {delegate!r}; expected one of {DELEGATES}")
    out_dir = Path(out_dir)
    pte = out_dir / pte_name(delegate, int8)
    weights = embedder_weights()
    digest = weights_sha256(weights)
    if not force and pte.is_file() and same_weights(out_dir / "model.json", digest):
        return pte
    if delegate == "qnn":
        qnn_sdk_root()
    write_program(explicit_mask_encoder(load_minilm_encoder(weights), token_types=True), pte,
                  delegate=delegate,
                  max_length=max_length, soc=soc, int8=int8)
    shutil.copyfile(weights / "tokenizer.json", out_dir / "tokenizer.json")
    meta = {"name": MODEL_NAME, "weights_sha256": digest, "dim": DIM,
            "pooling": "mean", "normalize": True,
            "max_length": int(max_length), "precision": "int8" if int8 else "fp32",
            "format": "executorch",
            "delegate": delegate, "inputs": list(INPUT_NAMES), "output": "sentence_embedding",
            "batch": 1}
    if delegate == "qnn":
        meta["soc"] = soc
    (out_dir / "model.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return pte
