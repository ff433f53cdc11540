"""`epic-edge devices`: the shipped device profiles and whether each can run on this machine."""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

from epic_edge.cli.common import parser
from epic_edge.models import model_dir
from epic_edge.profiles import Profile, list_profiles, load_profile


def _has(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _ort_providers() -> list[str]:
    if not _has("onnxruntime"):
        return []
    import onnxruntime

    return list(onnxruntime.get_available_providers())


def _platform_note(profile: Profile) -> str:
    want = profile.platform
    machine = platform.machine().lower()
    if want == "darwin-arm64" and not (sys.platform == "darwin" and machine == "arm64"):
        return f"needs macOS on Apple silicon; this is {platform.system()} {machine}"
    if want == "android-arm64" and not hasattr(sys, "getandroidapilevel") \
            and "ANDROID_ROOT" not in os.environ:
        return f"meant for Android (Termux) on arm64; this is {platform.system()} {machine}"
    if want == "linux-aarch64-cuda" and not (sys.platform == "linux" and machine == "aarch64"):
        return f"meant for a Jetson (Linux aarch64 + CUDA); this is {platform.system()} {machine}"
    return ""


def _embedder_notes(cfg: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(blocking problems, fallbacks) for the embedder section."""
    backend, blocks, falls = cfg.get("backend"), [], []
    if backend == "onnx":
        have = _ort_providers()
        if not have:
            blocks.append("onnxruntime is not installed (pip install 'epic-edge[cpu]')")
        missing = [p for p in cfg.get("providers", []) if have and p not in have]
        if missing:
            falls.append(f"ONNX Runtime here lacks {', '.join(missing)}: falls back to "
                         f"{[p for p in cfg.get('providers', []) if p in have] or ['CPU']}")
    elif backend == "coreml":
        if sys.platform != "darwin":
            blocks.append("Core ML prediction needs macOS (conversion works here)")
        if not _has("coremltools"):
            blocks.append("coremltools is not installed (pip install 'epic-edge[apple]')")
    elif backend == "executorch":
        if not _has("executorch"):
            blocks.append("executorch is not installed (pip install 'epic-edge[android]')")
        if cfg.get("prefer_qnn"):
            falls.append("QNN .pte needs the Qualcomm SDK at export ($QNN_SDK_ROOT) and the "
                         "Hexagon NPU at run time: XNNPACK (CPU) .pte used instead")
    return blocks, falls


def _verifier_notes(cfg: dict[str, Any]) -> tuple[list[str], list[str]]:
    backend, blocks, falls = cfg.get("backend"), [], []
    if backend == "llama-cpp":
        if not _has("llama_cpp"):
            blocks.append("llama-cpp-python is not installed (pip install 'epic-edge[cpu]')")
        elif int(cfg.get("n_gpu_layers", 0)):
            from epic_edge.backends.llama_cpp_verifier import gpu_offload_supported

            if not gpu_offload_supported():
                falls.append("llama-cpp-python here has no GPU offload: verifier on the CPU")
    elif backend == "mlx":
        if not (_has("mlx") and _has("mlx_lm")):
            blocks.append("mlx / mlx-lm are not installed (pip install 'epic-edge[apple]')")
        elif sys.platform != "darwin":
            falls.append("mlx runs on the CPU here (mlx[cpu]); the Metal GPU needs a Mac")
    elif backend == "learned":
        from epic_edge.backends.learned_runtimes import SUFFIX_FORMATS

        runtime = SUFFIX_FORMATS.get(Path(str(cfg.get("model", ""))).suffix, "onnx")
        blocks, falls = _embedder_notes({**cfg, "backend": runtime})
    elif backend == "llama-server":
        from epic_edge.backends.http_verifier import LlamaServerVerifier

        url = str(cfg.get("url", "http://127.0.0.1:8080"))
        if not LlamaServerVerifier(url, timeout_s=0.5, retries=0, chat_template="-").health():
            blocks.append(f"no llama.cpp server answers at {url} (start llama-server there)")
    return blocks, falls


def check_profile(profile: Profile, models: Path | None = None) -> dict[str, Any]:
    """{"name", "runs_here": "yes" | "fallback" | "no", "why": [...], "missing_files": [...]}."""
    blocks, falls = [], []
    note = _platform_note(profile)
    if note:
        falls.append(note)
    for part in (_embedder_notes(profile.embedder), _verifier_notes(profile.verifier)):
        blocks += part[0]
        falls += part[1]
    folder = models or model_dir()
    missing = [str(profile.embedder.get(k)) for k in ("model", "tokenizer")
               if profile.embedder.get(k) and not (folder / str(profile.embedder[k])).exists()]
    vmodel = profile.verifier.get("model")
    if vmodel and not (folder / str(vmodel)).exists():
        missing.append(str(vmodel))
    state = "no" if blocks else ("fallback" if falls else "yes")
    return {"name": profile.name, "description": profile.description,
            "platform": profile.platform, "runs_here": state,
            "why": list(dict.fromkeys(blocks + falls)),  # embedder and decision may share one
            "missing_files": missing, "models": str(folder)}


def main(argv: list[str]) -> int:
    p = parser("devices", "List the device profiles and say which can run on this machine, "
                          "and why not (execution providers, OS, SDKs, servers, model files).")
    p.add_argument("--models", type=Path, default=None,
                   help="model folder or bundle to check for files (default: $EPIC_EDGE_MODELS)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    reports = [check_profile(load_profile(name), args.models) for name in list_profiles()]
    if args.json:
        print(json.dumps(reports, indent=2))
        return 0
    for r in reports:
        print(f"{r['name']:<18} runs here: {r['runs_here']:<8} {r['description']}")
        for why in r["why"]:
            print(f"{'':<18}   - {why}")
        if r["missing_files"]:
            print(f"{'':<18}   - not in {r['models']}: {', '.join(r['missing_files'])} "
                  f"(epic-edge export --device {r['name']} --out DIR)")
    return 0
