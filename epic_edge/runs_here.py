"""Why a backend cannot run (or runs degraded) on this machine: the checks `devices` reports."""

from __future__ import annotations

import sys
from typing import Any

from epic_edge.registry import Backend, resolve

Notes = tuple[list[str], list[str]]  # (blocking problems, fallbacks)


def backend_notes(row: Backend, config: dict[str, Any]) -> Notes:
    """The row's missing imports block it; then its own check, if it has one, adds notes."""
    missing = row.missing_imports()
    if missing:
        return [f"{' / '.join(missing)} not installed (pip install 'epic-edge[{row.extra}]')"], []
    return resolve(row.check)(config) if row.check else ([], [])


def onnx(config: dict[str, Any]) -> Notes:
    import onnxruntime

    have = list(onnxruntime.get_available_providers())
    wanted = list(config.get("providers", []))
    missing = [p for p in wanted if p not in have]
    if not missing:
        return [], []
    return [], [f"ONNX Runtime here lacks {', '.join(missing)}: falls back to "
                f"{[p for p in wanted if p in have] or ['CPU']}"]


def coreml(config: dict[str, Any]) -> Notes:
    if sys.platform != "darwin":
        return ["Core ML prediction needs macOS (conversion works here)"], []
    return [], []


def executorch(config: dict[str, Any]) -> Notes:
    if config.get("prefer_qnn"):
        return [], ["QNN .pte needs the Qualcomm SDK at export ($QNN_SDK_ROOT) and the Hexagon "
                    "NPU at run time: XNNPACK (CPU) .pte used instead"]
    return [], []


def mlx(config: dict[str, Any]) -> Notes:
    if sys.platform != "darwin":
        return [], ["mlx runs on the CPU here (mlx[cpu]); the Metal GPU needs a Mac"]
    return [], []
