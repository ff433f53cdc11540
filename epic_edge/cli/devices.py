"""`epic-edge devices`: the shipped device profiles and whether each can run on this machine."""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

from epic_edge import registry
from epic_edge.cli.common import parser
from epic_edge.models import model_dir
from epic_edge.profiles import Profile, list_profiles, load_profile
from epic_edge.runs_here import backend_notes


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


def check_profile(profile: Profile, models: Path | None = None) -> dict[str, Any]:
    """{"name", "runs_here": "yes" | "fallback" | "no", "why": [...], "missing_files": [...]}."""
    blocks, falls = [], []
    note = _platform_note(profile)
    if note:
        falls.append(note)
    for kind in ("embedder", "verifier"):
        config = getattr(profile, kind)
        part = backend_notes(registry.backend(kind, config.get("backend")), config)
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
