"""Verification bench: Keep precision/recall/F1 of every decision module on the held-out split."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge_lab.calibrate import (
    best_f1_threshold,
    keep_metrics,
    load_verification_set,
    pair_cosines,
    pr_curve,
    threshold_for_recall,
)

from .verification_summary import (
    MINILM_PARAMS_M,
    RECALL_FLOOR,
    best_point,
    plot_curves,
    print_summary,
    size_statement,
)


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Probability that a random Keep pair outscores a random Discard pair (ties count half)."""
    s, y = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=bool)
    pos, neg = s[y], s[~y]
    if not len(pos) or not len(neg):
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(greater / (len(pos) * len(neg)))


def best_precision_at_recall(scores: np.ndarray, labels: np.ndarray,
                             floor: float = RECALL_FLOOR) -> dict[str, float]:
    ok = [c for c in pr_curve(scores, labels) if c["recall"] >= floor]
    return max(ok, key=lambda c: c["precision"]) if ok else {"precision": 0.0, "recall": 0.0,
                                                            "threshold": float("nan")}


def evaluate(name: str, test_scores: Any, test_labels: np.ndarray, threshold: float,
             fitted_on: str, ms_per_pair: float | None = None) -> dict[str, Any]:
    s = np.asarray(test_scores, dtype=np.float64)
    row = {"method": name, "threshold": float(threshold), "fitted_on": fitted_on,
           **keep_metrics(test_labels, s >= threshold), "roc_auc": roc_auc(s, test_labels),
           "best_precision_at_recall_0.8": best_precision_at_recall(s, test_labels),
           "ms_per_pair": ms_per_pair}
    row["curve"] = pr_curve(s, test_labels)[:: max(1, len(np.unique(s)) // 60)]
    return row


def coarse_rows(embedder: Any, train: list, test: list, tau: float) -> list[dict[str, Any]]:
    ytr = np.array([p.keep for p in train])
    yte = np.array([p.keep for p in test])
    t0 = time.perf_counter()
    ste = pair_cosines(embedder, test)
    ms = (time.perf_counter() - t0) * 1000 / len(test)
    s_tr = pair_cosines(embedder, train)
    return [
        evaluate("coarse cosine, profile tau", ste, yte, tau, "profile", ms),
        evaluate("coarse cosine, tau for recall 0.95", ste, yte,
                 threshold_for_recall(s_tr, ytr, 0.95), "train"),
        evaluate("coarse cosine, best-F1 threshold", ste, yte, best_f1_threshold(s_tr, ytr),
                 "train", ms),
        evaluate("coarse cosine, oracle best-F1 (test)", ste, yte, best_f1_threshold(ste, yte),
                 "test (oracle)", ms),
    ]


def cross_encoder_row(model_path: Path, test: list) -> dict[str, Any]:
    from epic_edge.backends.learned_verifier import LearnedVerifier

    verifier = LearnedVerifier(model_path)
    yte = np.array([p.keep for p in test])
    verifier.score_pairs([test[0].preference], [test[0].passage])  # warm-up
    t0 = time.perf_counter()
    scores = np.concatenate([verifier.score_pairs([p.preference], [p.passage]) for p in test])
    ms = (time.perf_counter() - t0) * 1000 / len(test)
    row = evaluate(f"learned {verifier.kind} ({model_path.parent.name})", scores, yte,
                   verifier.threshold, "train", ms)
    return {**row, "model": f"MiniLM-L6 {verifier.kind}", "params_m": MINILM_PARAMS_M,
            "kind": "learned"}


def llm_label(model_path: Path) -> tuple[str, float | None]:
    """("SmolLM2 135M", 135.0) from the GGUF's metadata; the file stem when it says nothing."""
    from epic_edge.backends.gguf_file import gguf_metadata

    meta = gguf_metadata(model_path)
    names = {"smollm2": "SmolLM2", "gemma-3": "Gemma 3"}
    base, size = str(meta.get("general.basename", "")), str(meta.get("general.size_label", ""))
    try:
        params = float(size.upper().rstrip("M")) if size.upper().endswith("M") else None
    except ValueError:
        params = None
    return (f"{names.get(base, base)} {size}".strip() if base else model_path.stem), params


def model_cache(cache: Path | None, model_path: Path) -> Path | None:
    """One score cache per model (the cache key holds mode and pair, not the model)."""
    return cache.with_name(f"{cache.stem}.{model_path.stem}{cache.suffix}") if cache else None


def llm_rows(model_path: Path, train: list, test: list, n_fit: int, modes: list[str],
             cache: Path | None, threads: int, json_limit: int) -> list[dict[str, Any]]:
    from epic_edge.backends.llama_cpp_verifier import LlamaCppVerifier

    from .verification_llm import few_shot_examples, score_pairs

    fit = [p for p in train if p.id % 5 == 0][:n_fit]  # stable when labels are revised
    examples = few_shot_examples(train)
    fit = [p for p in fit if (p.preference, p.passage[:60]) not in
           {(e[0], e[1][:60]) for e in examples}]
    label, params = llm_label(model_path)
    cache = model_cache(cache, model_path)
    rows = []
    with LlamaCppVerifier(model_path, n_ctx=2048, threads=threads) as verifier:
        log = lambda msg: print(f"  [{label}] {msg}", file=sys.stderr, flush=True)  # noqa: E731
        info = {"model": label, "params_m": params, "kind": "prompted LLM",
                "prompt_format": verifier.prompt_format}
        for mode in modes:
            sub = test[:json_limit] if mode == "json" and json_limit else test
            te = score_pairs(verifier, sub, [mode], examples, cache, log)[mode]
            yte = np.array([p.keep for p in sub])
            ms = 1000 * float(np.median(te["seconds"]))
            if mode == "json":
                rows.append(evaluate(f"{label} free-form JSON (paper)", te["scores"], yte, 0.5,
                                     "none (parsed)", ms))
                rows[-1]["unparsed"] = sum(1 for r in te["raw"] if "keep" not in r.lower()
                                           and "discard" not in r.lower())
            else:
                tr = score_pairs(verifier, fit, [mode], examples, cache, log)[mode]
                thr = best_f1_threshold(tr["scores"], [p.keep for p in fit])
                rows.append(evaluate(f"{label} logits, {mode}", te["scores"], yte, thr,
                                     f"train ({len(fit)} pairs)", ms))
            rows[-1].update(info)
            if len(sub) < len(test):
                rows[-1]["method"] += f" [first {len(sub)} test]"
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    head = f"{'method':<46} {'thr':>7} {'P':>6} {'R':>6} {'F1':>6} {'AUC':>6} {'P@R>=.8':>8} " \
           f"{'ms/pair':>8}"
    print(head)
    print("-" * len(head))
    for r in rows:
        ms = f"{r['ms_per_pair']:.1f}" if r.get("ms_per_pair") is not None else "-"
        print(f"{r['method']:<46} {r['threshold']:>7.3f} {r['precision']:>6.3f} "
              f"{r['recall']:>6.3f} {r['f1']:>6.3f} {r['roc_auc']:>6.3f} "
              f"{r['best_precision_at_recall_0.8']['precision']:>8.3f} {ms:>8}"
              + (f"  ({r['unparsed']} unreadable)" if r.get("unparsed") else ""))


def main(argv: list[str] | None = None) -> int:
    from epic_edge import registry
    from epic_edge.models import model_dir
    from epic_edge.profiles import load_profile

    p = argparse.ArgumentParser(prog="python -m epic_edge_lab.verification",
                                description=__doc__)
    p.add_argument("--profile", default="linux-cpu")
    p.add_argument("--models", type=Path, default=None)
    p.add_argument("--verifier-model", type=Path, action="append", default=None,
                   help="learned verifier ONNX, repeatable "
                        "(default MODELS/epic-verifier-minilm/model.onnx)")
    p.add_argument("--llm", type=Path, action="append", default=None,
                   help="GGUF, repeatable (default: the profile's llm_model, e.g. SmolLM2; "
                        "add MODELS/gemma3-270m-q4_k_m.gguf for Gemma 3 270M)")
    p.add_argument("--llm-modes", default="keep-discard,per-preference,few-shot,json",
                   help="comma list, or 'none'")
    p.add_argument("--llm-fit", type=int, default=60, help="train pairs to fit LLM thresholds")
    p.add_argument("--llm-test-limit", type=int, default=0,
                   help="LLM modes on the first N test pairs (0 = all; ~1-3 s per pair per mode)")
    p.add_argument("--json-limit", type=int, default=0,
                   help="test pairs for the JSON mode (0 = as many as the other modes)")
    p.add_argument("--llm-cache", type=Path, default=None,
                   help="resumable LLM score cache; one file per model beside this name")
    p.add_argument("--threads", type=int, default=1,
                   help="llama.cpp threads (1 is ~10x faster than 2 on a contended machine)")
    p.add_argument("--out", type=Path, default=Path("verification_bench.json"))
    p.add_argument("--plot", type=Path, default=None, help="precision-recall PNG")
    args = p.parse_args(argv)
    models = args.models or model_dir()
    prof = load_profile(args.profile)
    train, test = load_verification_set("train"), load_verification_set("test")
    print(f"labelled set: train {len(train)} ({sum(p.keep for p in train)} Keep), "
          f"test {len(test)} ({sum(p.keep for p in test)} Keep)")
    embedder = registry.create("embedder", prof.embedder, models)
    rows = coarse_rows(embedder, train, test, prof.tau)
    learned = args.verifier_model or [models / "epic-verifier-minilm" / "model.onnx"]
    for ce in learned:
        if ce.is_file():
            rows.append(cross_encoder_row(ce, test))
        else:
            print(f"(no learned verifier at {ce}; python -m epic_edge_lab.verifier.train)")
    modes = [m for m in args.llm_modes.split(",") if m and m != "none"]
    sub = test[: args.llm_test_limit] if args.llm_test_limit else test
    if modes and args.llm_test_limit:  # compare like with like: every method on the subset
        yte = np.array([p.keep for p in sub])
        rows.append(evaluate(f"coarse cosine, best-F1 threshold [first {len(sub)} test]",
                             pair_cosines(embedder, sub), yte, rows[2]["threshold"], "train"))
        for ce in (c for c in learned if c.is_file()):
            ce_sub = cross_encoder_row(ce, sub)
            ce_sub["method"] += f" [first {len(sub)} test]"
            rows.append(ce_sub)
    default_llm = prof.verifier.get("llm_model") or prof.verifier.get("model", "")
    for gguf in (args.llm or [models / str(default_llm)]) if modes else []:
        llm = llm_rows(gguf, train, sub, args.llm_fit, modes, args.llm_cache, args.threads,
                       args.json_limit)
        for r in llm:
            if args.llm_test_limit and "[" not in r["method"]:
                r["method"] += f" [first {len(sub)} test]"
        rows += llm
    coarse_p = rows[0]["best_precision_at_recall_0.8"]["precision"]
    for r in rows:
        r["precision_gain_at_recall_0.8"] = r["best_precision_at_recall_0.8"]["precision"] - \
            coarse_p
        r["meets_target"] = bool(r["f1"] >= 0.8 and r["precision_gain_at_recall_0.8"] >= 0.2)
    print_table(rows)
    best, size = best_point(rows), size_statement(rows)
    print_summary(best, size)
    result = {"bench": "verification", "embedder": prof.embedder.get("model"),
              "train_pairs": len(train), "test_pairs": len(test),
              "test_keep": int(sum(p.keep for p in test)), "rows": rows, "best_point": best,
              "model_size": size,
              "note": "ms figures measured on a shared, loaded 2-core machine (1 llama.cpp "
                      "thread): indicative only; an LLM row's ms is the median of the per-pair "
                      "timings kept in the resumable cache, which may span runs under "
                      "different load"}
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"written {args.out}")
    if args.plot:
        print(f"written {plot_curves(rows, args.plot)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
