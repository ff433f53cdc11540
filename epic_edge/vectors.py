"""Stored vector formats: float32, float16, or int8 scalar quantisation with a per-row scale."""

from __future__ import annotations

import numpy as np

from epic_edge.errors import DamagedRowError, InvalidInputError

VECTOR_FORMATS = ("float32", "float16", "int8")
# What an entry is indexed by: the kept item's own vector, its instruction's, or both summed
# (one vector, normalise(E(item) + E(instruction)): an inner product scores their sum).
ENTRY_VECTORS = ("item", "instruction", "item+instruction")
LEGACY_ENTRY_VECTOR = "instruction"  # files written before the choice was recorded


def bytes_per_vector(fmt: str, dim: int) -> int:
    return {"float32": 4 * dim, "float16": 2 * dim, "int8": dim + 4}[check_format(fmt)]


def check_format(fmt: str) -> str:
    if fmt not in VECTOR_FORMATS:
        raise InvalidInputError(f"vector format must be one of {VECTOR_FORMATS}, got {fmt!r}")
    return fmt


def check_entry_vector(kind: str) -> str:
    if kind not in ENTRY_VECTORS:
        raise InvalidInputError(f"entry_vector must be one of {ENTRY_VECTORS}, got {kind!r}")
    return kind


def encode(vector: np.ndarray, fmt: str = "float32") -> bytes:
    """One vector to bytes. int8: a little-endian float32 scale, then round(v / scale) as int8,
    with scale = max|v| / 127 (symmetric, per vector)."""
    v = np.asarray(vector, dtype=np.float32).reshape(-1)
    if fmt == "float32":
        return v.astype("<f4").tobytes()
    if fmt == "float16":
        return v.astype("<f2").tobytes()
    if fmt == "int8":
        scale = float(np.abs(v).max()) / 127.0 or 1.0
        q = np.clip(np.rint(v / scale), -127, 127).astype(np.int8)
        return np.float32(scale).astype("<f4").tobytes() + q.tobytes()
    raise InvalidInputError(f"unknown vector format {fmt!r}")


def decode(blob: bytes, dim: int, fmt: str = "float32") -> np.ndarray:
    """Bytes to a float32 vector, renormalised to unit length for float16 and int8."""
    if len(blob) != bytes_per_vector(fmt, dim):
        raise DamagedRowError(
            f"stored {fmt} vector has {len(blob)} bytes, expected {bytes_per_vector(fmt, dim)} "
            f"for dim {dim}"
        )
    if fmt == "float32":
        v = np.frombuffer(blob, dtype="<f4")
    elif fmt == "float16":
        v = np.frombuffer(blob, dtype="<f2").astype(np.float32)
    else:
        scale = np.frombuffer(blob[:4], dtype="<f4")[0]
        v = np.frombuffer(blob[4:], dtype=np.int8).astype(np.float32) * scale
    if not np.isfinite(v).all():
        raise DamagedRowError(f"a stored {fmt} vector holds values that are not finite")
    if fmt == "float32":
        return v
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v
