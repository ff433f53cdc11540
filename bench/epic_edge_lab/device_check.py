"""jetson-orin-nano's CUDA path on a GPU machine: embedder and learned decision parity + latency.

    python -m epic_edge_lab.device_check [--models DIR] [--out FILE] [--pairs N]

Runs the profile's embedder (TensorRT / CUDA / CPU providers, as listed) and its learned
decision (CUDA / CPU) against the same ONNX files on the CPU: cosine agreement of the
embeddings, max |delta P(Keep)| of the decision on the test pairs, median latencies, and the
providers each session really got. Refuses (exit 2) where ONNX Runtime has no CUDA provider:
the project never needs a GPU, this only measures one. scripts/device_check.sh wraps it.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

TEXTS = ["I'm vegan, so please never suggest dishes with meat, fish, eggs or dairy.",
         "How do I get from Kyoto Station to Fushimi Inari by train?"]


def _median_ms(fn: Any, repeats: int) -> float:
    fn()  # warm-up: CUDA kernels load, TensorRT builds its engine on the first run
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return round(1000 * statistics.median(times), 3)


def check(models: Path, pairs: int, repeats: int) -> dict[str, Any]:
    import onnxruntime as ort

    from epic_edge import registry
    from epic_edge.backends.learned_verifier import LearnedVerifier
    from epic_edge.export.learned_decision import PARITY_LIMIT, parity
    from epic_edge.profiles import load_profile
    from epic_edge_lab.calibrate import load_verification_set

    profile = load_profile("jetson-orin-nano")
    gpu_emb = registry.create("embedder", profile.embedder, models)
    cpu_emb = registry.create("embedder", {**profile.embedder, "providers": None}, models)
    decision = models / str(profile.verifier["model"])
    gpu_dec = LearnedVerifier(decision, providers=profile.verifier["providers"])
    cpu_dec = LearnedVerifier(decision)
    test = load_verification_set("test")[:pairs]
    texts = [p.passage for p in test][:64]
    cos = (gpu_emb.embed(texts) * cpu_emb.embed(texts)).sum(axis=1)
    result = parity(cpu_dec, gpu_dec, [p.preference for p in test], [p.passage for p in test])
    row = {
        "machine": platform.platform(), "onnxruntime": ort.__version__,
        "available_providers": ort.get_available_providers(),
        "embedder_providers": gpu_emb.providers, "decision_providers": gpu_dec._runner.providers,
        "embedder_min_cosine_vs_cpu": round(float(cos.min()), 6),
        "decision_parity_vs_cpu": result, "decision_within_limit":
            bool(result["max_abs_delta"] <= PARITY_LIMIT),
        "ms": {
            "embed 1 text (gpu)": _median_ms(lambda: gpu_emb.embed(TEXTS[:1]), repeats),
            "embed 1 text (cpu)": _median_ms(lambda: cpu_emb.embed(TEXTS[:1]), repeats),
            "embed 64 texts (gpu)": _median_ms(lambda: gpu_emb.embed(texts), max(3, repeats // 10)),
            "embed 64 texts (cpu)": _median_ms(lambda: cpu_emb.embed(texts), max(3, repeats // 10)),
            "decide 1 text (gpu)": _median_ms(lambda: gpu_dec.embed(TEXTS[:1]), repeats),
            "decide 1 text (cpu)": _median_ms(lambda: cpu_dec.embed(TEXTS[:1]), repeats),
        },
        "command": "bash scripts/device_check.sh",
    }
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m epic_edge_lab.device_check",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, default=None, help="model folder or jetson bundle")
    ap.add_argument("--out", type=Path, default=Path("bench/results/device_check.json"))
    ap.add_argument("--pairs", type=int, default=370, help="test pairs scored (all: 370)")
    ap.add_argument("--repeats", type=int, default=50)
    args = ap.parse_args(argv)
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        print(f"no CUDA provider in this onnxruntime ({ort.get_available_providers()}); "
              "install onnxruntime-gpu on a machine with an NVIDIA GPU", file=sys.stderr)
        return 2
    from epic_edge.models import model_dir

    row = check(args.models or model_dir(), args.pairs, args.repeats)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(row, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(row, indent=2))
    return 0 if row["decision_within_limit"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
