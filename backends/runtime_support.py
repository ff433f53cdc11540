"""What the ONNX and Core ML backends share: ONNX Runtime providers with their options, and
Core ML's macOS check (a helper module: backends import it, never each other)."""

from __future__ import annotations

import platform
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from epic_edge.errors import EpicEdgeError


def onnx_providers(ort: Any, requested: Sequence[Any] | None) -> list[Any]:
    """Requested providers this build has, in order; each a name or (name, options)."""
    available = ort.get_available_providers()
    wanted = list(requested) if requested else ["CPUExecutionProvider"]

    def name(p: Any) -> str:
        return p if isinstance(p, str) else str(p[0])

    usable = [p for p in wanted if name(p) in available]
    if len(usable) < len(wanted):
        missing = [name(p) for p in wanted if name(p) not in available]
        warnings.warn(
            f"ONNX Runtime providers {missing} are not available here ({available}); "
            "falling back to what is",
            RuntimeWarning,
            stacklevel=3,
        )
    return usable or ["CPUExecutionProvider"]


def with_options(config: dict[str, Any], model_dir: Path) -> list[Any] | None:
    """Profile providers, each paired with its [embedder.provider_options.NAME] table if any;
    option values ending in "_path" are relative to the model folder."""
    names = config.get("providers") or None
    options = config.get("provider_options") or {}
    if not names:
        return None
    out: list[Any] = []
    for provider in names:
        opts = dict(options.get(provider) or {})
        for key, value in opts.items():
            if key.endswith("_path") and isinstance(value, str) and not Path(value).is_absolute():
                opts[key] = str(model_dir / value)
        out.append((provider, opts) if opts else provider)
    return out


class CoreMLNotSupportedError(EpicEdgeError):
    """Core ML prediction runs on macOS only; conversion works anywhere."""


def require_macos() -> None:
    """Core ML predicts on macOS only: say so, and what to use here instead."""
    if sys.platform != "darwin":
        raise CoreMLNotSupportedError(
            f"Core ML prediction runs on macOS only; this is {platform.system()} "
            f"{platform.machine()}. Use the linux-cpu profile here, or copy the bundle to "
            "a Mac (docs/devices/macbook-m4.md)")
