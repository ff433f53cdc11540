"""The learned decision on each device format vs the linux-cpu ONNX model, on the test pairs.

    python -m epic_edge_lab.learned_parity [--json bench/results/learned_parity.json]

Scores all test pairs (bench/labels/test.jsonl) with the linux-cpu ONNX decision
and with each format that runs here: the jetson-orin-nano file through its provider list (CPU
fallback off a GPU), the galaxy-z-flip6 ExecuTorch program in fp32 (XNNPACK, exported from the
ONNX file; the int8 one the profile ships: bench.int8_programs); Core ML predicts on macOS
only. Also the noise floor of the int8 ONNX file itself (the same file under onnxruntime with
graph optimisations off), and each shipped profile's memory on the demo corpus against storing
every item.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from epic_edge.backends.learned_verifier import LearnedVerifier
from epic_edge.export.learned_decision import export_decision, parity
from epic_edge.models import model_dir
from epic_edge.profiles import load_profile
from epic_edge_lab.calibrate import load_verification_set

DEFAULT_JSON = Path("bench/results/learned_parity.json")


def _timed(reference: Any, device: Any, prefs: list[str], passages: list[str]
           ) -> dict[str, Any]:
    start = time.perf_counter()
    row = parity(reference, device, prefs, passages,
                 threshold=float(load_profile("linux-cpu").verifier["threshold"]))
    texts = len(set(prefs) | set(passages))
    row["ms_per_text_here"] = round(1000 * (time.perf_counter() - start) / texts, 2)
    return row


def _unoptimised(path: Path) -> LearnedVerifier:
    """The same ONNX file with onnxruntime's graph optimisations off (another kernel order)."""
    import onnxruntime as ort

    verifier = LearnedVerifier(path)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    verifier._runner.session = ort.InferenceSession(str(path), opts,
                                                    providers=["CPUExecutionProvider"])
    return verifier


def demo_sizes(models: Path, decisions: dict[str, Path]) -> list[dict[str, Any]]:
    """Each profile's memory of the demo persona over the demo corpus vs storing every item;
    a runtime that cannot run here is replaced by linux-cpu's (named in "runs")."""
    from epic_edge.baseline import StoreEverything
    from epic_edge.datasets import load_sample_corpus, load_sample_persona
    from epic_edge.memory import Memory

    persona, corpus = load_sample_persona(), load_sample_corpus()
    cpu, rows = load_profile("linux-cpu"), []
    for name in ("linux-cpu", "jetson-orin-nano", "macbook-m4", "galaxy-z-flip6"):
        profile = load_profile(name)
        runs = "as shipped" + (" (CPU fallback)" if name == "jetson-orin-nano" else "")
        if name in ("macbook-m4", "galaxy-z-flip6"):
            model = str(decisions.get(name, cpu.verifier["model"]))
            profile = replace(profile, embedder=cpu.embedder,
                              verifier={**profile.verifier, "model": model})
            runs = ("linux-cpu embedder; decision " +
                    ("ExecuTorch .pte" if name in decisions else "its ONNX source"))
        with tempfile.TemporaryDirectory() as tmp, \
                Memory.open(Path(tmp) / "m.epic", profile, model_dir=models) as memory:
            memory.add_preferences(persona["preferences"])
            kept = sum(s.kept for s in memory.ingest(corpus, batch_size=16))
            everything = StoreEverything(Path(tmp) / "all.sqlite", memory.embedder)
            everything.add(corpus)
            rows.append({"profile": name, "runs": runs, "items": len(corpus), "kept": kept,
                         "memory_bytes": memory.footprint()["total"],
                         "store_everything_bytes": everything.footprint()})
            everything.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m epic_edge_lab.learned_parity",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, default=DEFAULT_JSON)
    ap.add_argument("--limit", type=int, default=None, help="first N test pairs only")
    args = ap.parse_args(argv)
    models = model_dir()
    src = models / "epic-verifier-minilm"
    pairs = load_verification_set("test")[: args.limit]
    prefs, passages = [p.preference for p in pairs], [p.passage for p in pairs]
    reference = LearnedVerifier(src / "model.onnx")
    jetson = load_profile("jetson-orin-nano").verifier
    rows = {"onnx (jetson-orin-nano providers)": LearnedVerifier(
                src / "model.onnx", providers=jetson["providers"]),
            "onnx, graph optimisations off (noise floor)": _unoptimised(src / "model.onnx")}
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        pte = export_decision(src, Path(tmp) / "et", "executorch")
        export_s = time.perf_counter() - start
        rows["executorch xnnpack (galaxy-z-flip6)"] = LearnedVerifier(pte)
        result = {name: _timed(reference, v, prefs, passages) for name, v in rows.items()}
        result["executorch xnnpack (galaxy-z-flip6)"].update(
            export_s=round(export_s, 1), bytes=pte.stat().st_size)
        sizes = demo_sizes(models, {"galaxy-z-flip6": pte})
        if sys.platform == "darwin":  # pragma: no cover - Core ML predicts on macOS only
            package = export_decision(src, Path(tmp) / "cm", "coreml")
            result["coreml (macbook-m4)"] = _timed(reference, LearnedVerifier(
                package, compute_units="ALL"), prefs, passages)
        else:
            result["coreml (macbook-m4)"] = {"runs_here": False, "note": "Core ML predicts on "
                                             "macOS only: conversion and spec checked in tests"}
    out = {"reference": "linux-cpu ONNX decision (epic-verifier-minilm/model.onnx, "
                        "one text per run)", "pairs": len(pairs), "formats": result,
           "demo_corpus": sizes,
           "command": "python -m epic_edge_lab.learned_parity"}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
