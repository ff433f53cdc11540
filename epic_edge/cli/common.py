"""Options and helpers shared by the CLI commands."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from epic_edge.memory import Memory
from epic_edge.profiles import DEFAULT_PROFILE


def default_memory_path() -> Path:
    env = os.environ.get("EPIC_EDGE_MEMORY")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".local" / "share" / "epic-edge" / "memory.epic"


def parser(command: str, description: str) -> argparse.ArgumentParser:
    return argparse.ArgumentParser(prog=f"epic-edge {command}", description=description)


def add_memory_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--memory", type=Path, default=None,
                   help="memory file (default: $EPIC_EDGE_MEMORY or "
                        "~/.local/share/epic-edge/memory.epic)")
    add_profile_options(p)


def add_profile_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default=DEFAULT_PROFILE,
                   help=f"device profile name or .toml path (default: {DEFAULT_PROFILE})")
    p.add_argument("--models", type=Path, default=None,
                   help="model folder (default: $EPIC_EDGE_MODELS or ~/.cache/epic-edge/models)")


def open_memory(args: argparse.Namespace) -> Memory:
    return Memory.open(args.memory or default_memory_path(), args.profile, model_dir=args.models)


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"
