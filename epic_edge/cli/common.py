"""Options and helpers shared by the CLI commands."""

from __future__ import annotations

import argparse
import json
import logging
import os
import warnings
from pathlib import Path
from typing import Any

from epic_edge.crypto import parse_key, read_key_file
from epic_edge.errors import MemoryFileError
from epic_edge.memory import Memory
from epic_edge.profiles import DEFAULT_PROFILE


def default_memory_path() -> Path:
    env = os.environ.get("EPIC_EDGE_MEMORY")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".local" / "share" / "epic-edge" / "memory.epic"


class _Parser(argparse.ArgumentParser):
    """No abbreviated options (`--key` must not stand for --key-file), subcommands included."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)


def parser(command: str, description: str) -> argparse.ArgumentParser:
    return _Parser(prog=f"epic-edge {command}", description=description)


def add_memory_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--memory", type=Path, default=None,
                   help="memory file (default: $EPIC_EDGE_MEMORY or "
                        "~/.local/share/epic-edge/memory.epic)")
    p.add_argument("--key-file", type=Path, default=None,
                   help="file (mode 600) holding the memory's encryption key, hex or base64 "
                        "(`epic-edge keygen FILE` writes one); or set $EPIC_EDGE_KEY. The key "
                        "itself is never an argument: it would show in `ps`")
    add_profile_options(p)


def add_profile_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default=os.environ.get("EPIC_EDGE_PROFILE") or DEFAULT_PROFILE,
                   help="device profile name or .toml path (default: $EPIC_EDGE_PROFILE or "
                        f"{DEFAULT_PROFILE})")
    p.add_argument("--models", type=Path, default=None,
                   help="model folder (default: $EPIC_EDGE_MODELS or ~/.cache/epic-edge/models)")


def memory_key(key_file: Path | None) -> bytes | None:
    """The key from --key-file, else $EPIC_EDGE_KEY, else None (an unencrypted memory)."""
    if key_file is not None:
        return read_key_file(key_file)
    env = os.environ.get("EPIC_EDGE_KEY")
    return parse_key(env, "$EPIC_EDGE_KEY") if env else None


def open_memory(args: argparse.Namespace, *, read_only: bool = False,
                creates: bool = False) -> Memory:
    """The memory the options name; read-only commands neither create nor change a file, and
    only the commands that start a memory (`creates`: prefs add, ingest, restore, serve)
    create one at a path that holds none."""
    path = args.memory or default_memory_path()
    if not (read_only or creates or path.is_dir()) and not (
            path.is_file() and path.stat().st_size > 0):
        raise MemoryFileError(f"no memory file at {path} (`epic-edge prefs add` or `epic-edge "
                              "ingest` starts one)")
    return Memory.open(path, args.profile, model_dir=args.models, key=memory_key(args.key_file),
                       read_only=read_only)


def print_json(value: Any) -> None:
    """Data for a program on stdout: indented JSON, text as is (not \\u-escaped)."""
    print(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def plural(n: int, word: str, many: str | None = None) -> str:
    """"1 entry", "2 entries": a count with its noun."""
    if n == 1:
        return f"{n} {word}"
    return f"{n} {many or (word[:-1] + 'ies' if word.endswith('y') else word + 's')}"


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
