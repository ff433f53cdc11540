"""The learned verifier's networks: build, tokenise, score with torch and export to ONNX."""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.export.decision_nets import build_cross_encoder  # noqa: F401  (re-exported)
from epic_edge.optional import optional_import
from epic_edge_lab.calibrate import LabelledPair

INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT_NAME = "keep_logit"
MAX_LENGTH = 192


def _torch() -> Any:
    return optional_import("torch", "export", "training the learned verifier")


def warmup_decay(torch: Any, opt: Any, epochs: int, pairs: int, batch_size: int) -> Any:
    """The learning-rate schedule of every verifier training: linear warm-up over the first
    tenth of the steps, then linear decay to 0 at the last."""
    steps = epochs * -(-pairs // batch_size)
    return torch.optim.lr_scheduler.LambdaLR(
        opt, lambda k: min(1.0, (k + 1) / max(1, steps // 10)) * max(0.0, 1 - k / steps))


def clipped_step(torch: Any, loss: Any, opt: Any, schedule: Any, module: Any) -> None:
    """One optimiser step on `loss`, `module`'s gradients clipped to norm 1, then the
    schedule's step."""
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)
    opt.step()
    schedule.step()


def load_tokenizer(path: Path, max_length: int = MAX_LENGTH) -> Any:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path))
    tok.enable_truncation(max_length=max_length, strategy="only_second")
    tok.no_padding()
    return tok


def encode_pairs(tokenizer: Any, prefs: Sequence[str], passages: Sequence[str]
                 ) -> dict[str, np.ndarray]:
    """Padded int64 arrays for (preference, passage) pairs; passages truncate first."""
    encs = tokenizer.encode_batch(list(zip(prefs, passages)))
    width = max(len(e.ids) for e in encs)
    out = {n: np.zeros((len(encs), width), dtype=np.int64) for n in INPUT_NAMES}
    for row, e in enumerate(encs):
        n = len(e.ids)
        out["input_ids"][row, :n] = e.ids
        out["attention_mask"][row, :n] = e.attention_mask
        out["token_type_ids"][row, :n] = e.type_ids
    return out


def torch_scores(model: Any, tokenizer: Any, pairs: Sequence[LabelledPair],
                 batch_size: int = 32) -> np.ndarray:
    """P(Keep) = sigmoid(logit) from the torch model, in the pairs' order."""
    torch = _torch()
    model.eval()
    out = []
    with torch.no_grad():
        for s in range(0, len(pairs), batch_size):
            chunk = pairs[s:s + batch_size]
            feed = encode_pairs(tokenizer, [p.preference for p in chunk],
                                [p.passage for p in chunk])
            logits = model(**{k: torch.from_numpy(v) for k, v in feed.items()})
            out.append(torch.sigmoid(logits).numpy())
    return np.concatenate(out).astype(np.float64)


class _Siamese:
    """Holds the fine-tuned encoder and the affine map cos -> Keep logit."""

    def __init__(self, encoder: Any, scale: Any, bias: Any) -> None:
        self.encoder, self.scale, self.bias = encoder, scale, bias


def _embed(torch: Any, encoder: Any, tokenizer: Any, texts: Sequence[str]) -> Any:
    encs = tokenizer.encode_batch(list(texts))
    width = max(len(e.ids) for e in encs)
    ids = torch.zeros(len(encs), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, e in enumerate(encs):
        ids[row, : len(e.ids)] = torch.tensor(e.ids)
        mask[row, : len(e.ids)] = 1
    hidden = encoder(input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids),
                     return_dict=False)[0]
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return torch.nn.functional.normalize((hidden * m).sum(1) / m.sum(1).clamp(min=1e-9), dim=1)


def siamese_scores(model: _Siamese, tokenizer: Any, pairs: Sequence[LabelledPair],
                   batch_size: int = 32) -> np.ndarray:
    """P(Keep) = sigmoid(scale * cos(E'(p), E'(x)) + bias) from the torch model."""
    torch = _torch()
    model.encoder.eval()
    out = []
    with torch.no_grad():
        for s in range(0, len(pairs), batch_size):
            c = pairs[s:s + batch_size]
            cos = (_embed(torch, model.encoder, tokenizer, [p.preference for p in c])
                   * _embed(torch, model.encoder, tokenizer, [p.passage for p in c])).sum(1)
            out.append(torch.sigmoid(model.scale * cos + model.bias).numpy())
    return np.concatenate(out).astype(np.float64)


def export_siamese_onnx(model: _Siamese, out_dir: Path, *, quantize: bool = True,
                        opset: int = 17) -> Path:
    """The fine-tuned encoder as a pooled, normalised ONNX (same I/O as the embedder)."""
    from epic_edge.export.minilm_onnx import _pooled_encoder

    return export_embedding_onnx(_pooled_encoder(_torch(), model.encoder), out_dir,
                                 quantize=quantize, opset=opset)


def export_embedding_onnx(module: Any, out_dir: Path, *, quantize: bool = True,
                          opset: int = 17) -> Path:
    """out_dir/model.onnx of a module (input_ids, attention_mask, token_type_ids) -> vectors,
    with the embedder's input and output names."""
    from epic_edge.export.minilm_onnx import OUTPUT_NAME as EMB_OUT

    torch = _torch()
    out_dir.mkdir(parents=True, exist_ok=True)
    sample = torch.tensor([[101, 7592, 2088, 102], [101, 7592, 102, 0]])
    mask = (sample != 0).to(torch.int64)
    fp32 = out_dir / "model.fp32.onnx"
    dynamic = {n: {0: "batch", 1: "sequence"} for n in INPUT_NAMES}
    dynamic[EMB_OUT] = {0: "batch"}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), (sample, mask, torch.zeros_like(sample)), str(fp32),
                          input_names=list(INPUT_NAMES), output_names=[EMB_OUT],
                          dynamic_axes=dynamic, opset_version=opset, do_constant_folding=True,
                          dynamo=False)
    return _finish(fp32, out_dir / "model.onnx", quantize)


def _finish(fp32: Path, target: Path, quantize: bool) -> Path:
    if quantize:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(str(fp32), str(target), per_channel=True, weight_type=QuantType.QInt8)
        fp32.unlink()
    else:
        os.replace(fp32, target)
    return target


def export_onnx(model: Any, out_dir: Path, *, quantize: bool = True, opset: int = 17) -> Path:
    """Write out_dir/model.onnx (int8 dynamic, per channel, when `quantize`)."""
    torch = _torch()
    out_dir.mkdir(parents=True, exist_ok=True)
    sample = torch.tensor([[101, 7592, 102, 2088, 102], [101, 7592, 102, 2088, 0]])
    mask = (sample != 0).to(torch.int64)
    types = torch.tensor([[0, 0, 0, 1, 1], [0, 0, 0, 1, 0]])
    fp32 = out_dir / "model.fp32.onnx"
    dynamic = {n: {0: "batch", 1: "sequence"} for n in INPUT_NAMES}
    dynamic[OUTPUT_NAME] = {0: "batch"}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model.eval(), (sample, mask, types), str(fp32),
                          input_names=list(INPUT_NAMES), output_names=[OUTPUT_NAME],
                          dynamic_axes=dynamic, opset_version=opset, do_constant_folding=True,
                          dynamo=False)
    return _finish(fp32, out_dir / "model.onnx", quantize)
