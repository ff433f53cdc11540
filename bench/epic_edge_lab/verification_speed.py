"""Verification speed: ms per LLM decision with and without prefix reuse; LLM calls per item."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from epic_edge.types import Preference


def prefix_reuse_timing(verifier: Any, items: list[str], prefs: list[str],
                        rounds: int = 1) -> dict[str, Any]:
    """Decision time per item, the two ways interleaved item by item so machine load hits both
    alike: "reuse" keeps the KV state of the shared system + preference-list prefix and
    evaluates only the item's tokens; "cold" drops the state first and evaluates everything."""
    cands = [Preference(k + 1, t) for k, t in enumerate(prefs)]
    llm = verifier._llm  # the bench looks inside on purpose: it measures the cache itself
    verifier.score(items[0], cands)  # warm-up, fills the prefix
    cold, warm, p_cold, p_warm = [], [], [], []
    for _ in range(rounds):
        for text in items:
            llm.reset()
            t0 = time.perf_counter()
            p_cold.append(verifier.score(text, cands)[0])
            cold.append(time.perf_counter() - t0)
            verifier.score(items[0], cands)  # the previous item leaves the shared prefix cached
            t0 = time.perf_counter()
            p_warm.append(verifier.score(text, cands)[0])
            warm.append(time.perf_counter() - t0)
    tokens = len(verifier._prompt_tokens(
        __import__("epic_edge.backends.verifier_prompts", fromlist=["x"]).decision_messages(
            "", cands)))
    cold_ms, warm_ms = 1000 * statistics.median(cold), 1000 * statistics.median(warm)
    return {"items": len(items), "prompt_prefix_tokens": tokens, "cold_ms_median": cold_ms,
            "reuse_ms_median": warm_ms, "speedup": cold_ms / warm_ms,
            "max_abs_p_keep_difference": max(abs(a - b) for a, b in zip(p_cold, p_warm))}


def calls_per_item(profile: str, models: Path, verifier_config: dict[str, Any] | None,
                   items: list[Any], prefs: list[str]) -> dict[str, Any]:
    """Ingest `items` into a fresh memory; LLM calls and time per ingested item."""
    from epic_edge import registry
    from epic_edge.memory import Memory
    from epic_edge.profiles import load_profile

    prof = load_profile(profile)
    verifier = registry.create("verifier", verifier_config, models) if verifier_config else None
    with tempfile.TemporaryDirectory() as tmp, Memory.open(
            Path(tmp) / "m.epic", prof, model_dir=models, verifier=verifier) as memory:
        memory.add_preferences(prefs)
        t0 = time.perf_counter()
        stats = memory.ingest(items, batch_size=32)
        seconds = time.perf_counter() - t0
    seen = sum(s.seen for s in stats)
    calls = sum(s.llm_calls for s in stats)
    verified = sum(s.verified for s in stats)
    return {"verifier": (verifier_config or prof.verifier).get("backend"), "items": seen,
            "passed_filter": sum(s.passed_filter for s in stats), "verified": verified,
            "kept": sum(s.kept for s in stats), "llm_calls": calls,
            "llm_calls_per_item": calls / max(seen, 1), "seconds": seconds,
            "ms_per_verified_item": 1000 * seconds / max(verified, 1)}


def main(argv: list[str] | None = None) -> int:
    from epic_edge.backends.llama_cpp_verifier import LlamaCppVerifier
    from epic_edge.datasets import load_sample_corpus, load_sample_persona
    from epic_edge.models import model_dir
    from epic_edge.profiles import load_profile

    p = argparse.ArgumentParser(prog="python -m epic_edge_lab.verification_speed",
                                description=__doc__)
    p.add_argument("--profile", default="linux-cpu")
    p.add_argument("--threads", type=int, default=1, help="llama.cpp threads")
    p.add_argument("--models", type=Path, default=None)
    p.add_argument("--items", type=int, default=20, help="items timed for prefix reuse")
    p.add_argument("--corpus", type=int, default=120, help="corpus slice for calls per item")
    p.add_argument("--verifiers", default="llama-cpp,learned",
                   help="which verifiers to ingest the corpus slice with")
    p.add_argument("--ce-model", default="epic-verifier-minilm/model.onnx",
                   help="learned verifier model, relative to MODELS or absolute")
    p.add_argument("--no-reuse-timing", action="store_true")
    p.add_argument("--out", type=Path, default=Path("verification_speed.json"))
    args = p.parse_args(argv)
    models = args.models or model_dir()
    prof = load_profile(args.profile)
    corpus = load_sample_corpus()
    prefs = load_sample_persona()["preferences"]
    texts = [it.text for it in corpus[: args.items]]
    gguf = models / str(prof.verifier.get("model", "smollm2-135m-instruct-q4_1.gguf"))
    reuse: dict[str, Any] = {}
    if not args.no_reuse_timing:
        with LlamaCppVerifier(gguf, threads=args.threads) as v:
            reuse = prefix_reuse_timing(v, texts, prefs)
        print(f"prefix reuse ({reuse['items']} items, {reuse['prompt_prefix_tokens']}-token "
              f"prefix): cold {reuse['cold_ms_median']:.0f} ms, reused "
              f"{reuse['reuse_ms_median']:.0f} ms per decision ({reuse['speedup']:.2f}x)")
    slice_ = corpus[: args.corpus]
    runs = []
    llm_cfg = {**prof.verifier, "backend": "llama-cpp", "threads": args.threads,
               "model": prof.verifier.get("llm_model", prof.verifier.get("model"))}
    ce_cfg = {"backend": "learned", "model": args.ce_model, "instructions": "llama-cpp",
              "llm_model": llm_cfg["model"], "threads": args.threads}
    chosen = [c for c in (llm_cfg, ce_cfg) if c["backend"] in args.verifiers.split(",")]
    for cfg in chosen:
        try:
            runs.append(calls_per_item(args.profile, models, cfg, slice_, prefs))
        except Exception as exc:  # e.g. no learned verifier built: report, go on
            runs.append({"verifier": cfg["backend"], "error": str(exc)})
    for r in runs:
        if "error" in r:
            print(f"{r['verifier']:>14}: {r['error']}")
            continue
        print(f"{r['verifier']:>14}: {r['items']} items, {r['passed_filter']} past the filter, "
              f"{r['kept']} kept, {r['llm_calls']} LLM calls = {r['llm_calls_per_item']:.3f} "
              f"per item, {r['ms_per_verified_item']:.0f} ms per verified item")
    out = {"bench": "verification_speed", "prefix_reuse": reuse, "calls_per_item": runs,
           "note": "timings on a shared, loaded 2-core machine: indicative only"}
    args.out.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
