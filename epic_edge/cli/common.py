"""Options and helpers shared by the CLI commands."""

from __future__ import annotations

import argparse
import json
import logging
import os
import warnings
from pathlib import Path
from typing import Any

from epic_edge.errors import InvalidInputError
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
    p.add_argument("--key-file", type=Path, default=None,
                   help="file holding the memory's encryption key (32 bytes, or 64 hex "
                        "digits; default: $EPIC_EDGE_KEY_FILE; never the key itself)")
    add_profile_options(p)


def add_profile_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default=os.environ.get("EPIC_EDGE_PROFILE") or DEFAULT_PROFILE,
                   help="device profile name or .toml path (default: $EPIC_EDGE_PROFILE or "
                        f"{DEFAULT_PROFILE})")
    p.add_argument("--models", type=Path, default=None,
                   help="model folder (default: $EPIC_EDGE_MODELS or ~/.cache/epic-edge/models)")


def read_key(path: Path | None) -> bytes | None:
    """The key in `path` (or $EPIC_EDGE_KEY_FILE): 32 raw bytes or 64 hex digits."""
    if path is None:
        env = os.environ.get("EPIC_EDGE_KEY_FILE")
        path = Path(env).expanduser() if env else None
    if path is None:
        return None
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InvalidInputError(f"cannot read the key file {path}: {exc.strerror}") from None
    text = raw.strip()
    if len(text) == 64:
        try:
            return bytes.fromhex(text.decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            pass
    if len(raw) == 32:
        return raw
    raise InvalidInputError(f"{path} must hold a 32-byte key (raw, or as 64 hex digits)")


def open_memory(args: argparse.Namespace) -> Memory:
    return Memory.open(args.memory or default_memory_path(), args.profile, model_dir=args.models,
                       key=read_key(getattr(args, "key_file", None)))


def print_json(value: Any) -> None:
    """Data for a program on stdout: indented JSON, text as is (not \\u-escaped)."""
    print(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def quiet_libraries() -> None:
    """Silence other libraries' warnings, log lines and progress bars (torch, transformers,
    ONNX Runtime's quantiser) for commands that load them; errors still show, and so do
    epic-edge's own warnings."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    os.environ.setdefault("TORCH_LOGS", "-all")  # torch's own handler: errors only
    warnings.filterwarnings("ignore")
    logging.getLogger().setLevel(logging.ERROR)  # the quantiser logs through the root logger
    logging.getLogger("epic_edge").setLevel(logging.WARNING)
    for name in ("torch", "torchao", "transformers", "onnx", "onnxruntime", "coremltools"):
        logging.getLogger(name).setLevel(logging.ERROR)
