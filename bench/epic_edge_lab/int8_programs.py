"""The int8 ExecuTorch programs a bundle can ship, against their fp32 sources.

    python -m epic_edge_lab.int8_programs [--json bench/results/int8_programs.json]

Exports the installed learned decision and the MiniLM embedder as XNNPACK programs in int8
(export/minilm_executorch.py: an int8 word table and dynamic int8 Linear layers), then on the
labelled test pairs: the decision's ROC AUC against its fp32 ONNX source's, its decisions at the
profiles' threshold, max |delta P(Keep)|; the embedder's cosine with the fp32 ONNX embedder;
file sizes and ms per text. A bundle ships the int8 decision only where its AUC is within 0.01
of fp32's (docs/bundles.md).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.backends.executorch_embedder import ExecuTorchEmbedder
from epic_edge.backends.learned_verifier import LearnedVerifier
from epic_edge.backends.onnx_embedder import OnnxEmbedder
from epic_edge.export.learned_decision import export_decision_executorch
from epic_edge.export.minilm_executorch import export_executorch
from epic_edge.export.minilm_onnx import FOLDER
from epic_edge.models import model_dir
from epic_edge.profiles import load_profile
from epic_edge_lab.calibrate import load_verification_set
from epic_edge_lab.verification import roc_auc

AUC_MARGIN = 0.01  # the int8 decision ships where its AUC is within this of fp32's


def decision_row(source: Path, folder: Path, prefs: list[str], passages: list[str],
                 labels: np.ndarray, threshold: float) -> dict[str, Any]:
    """The int8 decision program against its fp32 ONNX source on the given pairs."""
    start = time.perf_counter()
    pte = export_decision_executorch(source, folder, int8=True)
    exported = time.perf_counter() - start
    reference, device = LearnedVerifier(source / "model.onnx"), LearnedVerifier(pte)
    start = time.perf_counter()
    fp32, int8 = reference.score_pairs(prefs, passages), device.score_pairs(prefs, passages)
    texts = len(set(prefs) | set(passages))
    row = {"pairs": len(labels), "roc_auc_fp32": round(roc_auc(fp32, labels), 4),
           "roc_auc_int8": round(roc_auc(int8, labels), 4),
           "decisions_agree": round(float(np.mean((fp32 >= threshold) == (int8 >= threshold))),
                                    4),
           "max_abs_delta": round(float(np.abs(fp32 - int8).max()), 4),
           "mean_abs_delta": round(float(np.abs(fp32 - int8).mean()), 4),
           "threshold": threshold, "bytes_fp32_onnx": (source / "model.onnx").stat().st_size,
           "bytes_int8_pte": pte.stat().st_size, "export_seconds": round(exported, 1),
           "ms_per_text_here": round(1000 * (time.perf_counter() - start) / texts, 2)}
    row["auc_drop"] = round(row["roc_auc_fp32"] - row["roc_auc_int8"], 4)
    row["within_margin"] = row["auc_drop"] <= AUC_MARGIN
    return row


def embedder_row(folder: Path, texts: list[str]) -> dict[str, Any]:
    """The int8 embedder program against the fp32 ONNX embedder (and linux-cpu's int8 ONNX)."""
    source = model_dir() / FOLDER
    pte = export_executorch(folder, int8=True)
    tokenizer = source / "tokenizer.json"
    fp32 = OnnxEmbedder(source / "model.onnx", tokenizer).embed(texts)
    onnx_int8 = OnnxEmbedder(source / "model.int8.onnx", tokenizer).embed(texts)
    program = ExecuTorchEmbedder(pte, tokenizer).embed(texts)
    cos, onnx_cos = (program * fp32).sum(axis=1), (onnx_int8 * fp32).sum(axis=1)
    return {"texts": len(texts), "min_cosine": round(float(cos.min()), 5),
            "mean_cosine": round(float(cos.mean()), 5),
            "linux_cpu_int8_onnx_min_cosine": round(float(onnx_cos.min()), 5),
            "bytes_int8_pte": pte.stat().st_size,
            "bytes_fp32_onnx": (source / "model.onnx").stat().st_size}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", type=Path, default=None, help="write the figures here")
    p.add_argument("--limit", type=int, default=None, help="first N test pairs only")
    args = p.parse_args(argv)
    pairs = load_verification_set("test")[:args.limit]
    prefs, passages = [q.preference for q in pairs], [q.passage for q in pairs]
    labels = np.array([q.keep for q in pairs])
    threshold = float(load_profile("linux-cpu").verifier["threshold"])
    with tempfile.TemporaryDirectory(prefix="epic-int8-") as tmp:
        result = {"decision": decision_row(model_dir() / "epic-verifier-minilm",
                                           Path(tmp) / "decision", prefs, passages, labels,
                                           threshold),
                  "embedder": embedder_row(Path(tmp) / "embedder",
                                           sorted(set(prefs) | set(passages)))}
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
