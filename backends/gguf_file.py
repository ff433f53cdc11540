"""GGUF files: check one is complete, read its metadata and quantisation (no llama.cpp needed)."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path
from typing import BinaryIO

from epic_edge.errors import ModelNotFoundError

GGUF_MAGIC = b"GGUF"

# ggml tensor type -> (elements per block, bytes per block); types not listed skip the size check.
_GGML_BLOCKS: dict[int, tuple[int, int]] = {
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
    9: (32, 36), 10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210),
    15: (256, 292), 24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8), 30: (1, 2),
}
# GGUF metadata value type -> struct format of a scalar (8 = string, 9 = array are special).
_SCALARS: dict[int, str] = {
    0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q",
    12: "<d",
}
_HEADER_BYTES = 24  # magic, version u32, tensor count u64, metadata count u64


def check_gguf(path: Path) -> Path:
    """Raise ModelNotFoundError unless `path` is a complete GGUF file; return the path.

    Reads the header, metadata and tensor table, then checks that the file is long enough to
    hold every tensor, so a truncated download is caught before llama.cpp sees it.
    """
    path = Path(path)
    if not path.is_file():
        raise ModelNotFoundError(f"GGUF model file not found: {path}")
    size = path.stat().st_size
    with path.open("rb") as fh:
        head = fh.read(_HEADER_BYTES)
        if head[:4] != GGUF_MAGIC:
            raise ModelNotFoundError(
                f"{path} is not a GGUF file (magic {head[:4]!r}, expected {GGUF_MAGIC!r})"
            )
        if len(head) < _HEADER_BYTES:
            raise ModelNotFoundError(f"{path} is truncated: {size} bytes, shorter than a header")
        version, n_tensors, n_kv = struct.unpack("<IQQ", head[4:])
        if version < 2:
            raise ModelNotFoundError(f"{path}: GGUF version {version} is too old (need >= 2)")
        try:
            needed = _required_size(fh, n_tensors, n_kv)
        except (struct.error, EOFError, ValueError) as exc:
            raise ModelNotFoundError(f"{path} is truncated or corrupt ({exc})") from exc
    if size < needed:
        raise ModelNotFoundError(
            f"{path} is truncated: {size} bytes, its tensor table needs at least {needed}"
        )
    return path


def _required_size(fh: BinaryIO, n_tensors: int, n_kv: int) -> int:
    """Bytes a GGUF must have to hold all its tensors, from the header onward."""
    alignment = 32
    for _ in range(n_kv):
        key = _read_str(fh)
        vtype = _unpack(fh, "<I")
        value = _read_value(fh, vtype)
        if key == "general.alignment" and isinstance(value, int) and value > 0:
            alignment = value
    end = 0
    for _ in range(n_tensors):
        _read_str(fh)
        n_dims = _unpack(fh, "<I")
        dims = [_unpack(fh, "<Q") for _ in range(n_dims)]
        ttype = _unpack(fh, "<I")
        offset = _unpack(fh, "<Q")
        nbytes = 0
        if ttype in _GGML_BLOCKS:
            n_elems = 1
            for d in dims:
                n_elems *= d
            block, block_bytes = _GGML_BLOCKS[ttype]
            nbytes = n_elems // block * block_bytes
        end = max(end, offset + nbytes)
    data_start = -(-fh.tell() // alignment) * alignment
    return data_start + end


def _read_exact(fh: BinaryIO, n: int) -> bytes:
    data = fh.read(n)
    if len(data) != n:
        raise EOFError(f"wanted {n} bytes at offset {fh.tell() - len(data)}, file ended")
    return data


def _unpack(fh: BinaryIO, fmt: str) -> int:
    return struct.unpack(fmt, _read_exact(fh, struct.calcsize(fmt)))[0]


def _read_str(fh: BinaryIO) -> str:
    n = _unpack(fh, "<Q")
    if n > 1 << 30:
        raise ValueError(f"implausible string length {n}")
    return _read_exact(fh, n).decode("utf-8", errors="replace")


def _read_value(fh: BinaryIO, vtype: int) -> object:
    if vtype in _SCALARS:
        return struct.unpack(_SCALARS[vtype], _read_exact(fh, struct.calcsize(_SCALARS[vtype])))[0]
    if vtype == 8:
        return _read_str(fh)
    if vtype == 9:
        item_type = _unpack(fh, "<I")
        count = _unpack(fh, "<Q")
        if item_type in _SCALARS:  # skip fixed-size arrays in one read
            _read_exact(fh, count * struct.calcsize(_SCALARS[item_type]))
            return None
        for _ in range(count):
            _read_value(fh, item_type)
        return None
    raise ValueError(f"unknown GGUF metadata type {vtype}")


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


# llama_ftype (general.file_type) -> quantisation name, for bundle manifests.
FILE_TYPES: dict[int, str] = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
    11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
    17: "Q5_K_M", 18: "Q6_K", 32: "BF16",
}


def gguf_metadata(path: Path) -> dict[str, object]:
    """The GGUF's scalar and string metadata (arrays such as the vocabulary are skipped)."""
    path = check_gguf(Path(path))
    meta: dict[str, object] = {}
    with path.open("rb") as fh:
        _, _, n_kv = struct.unpack("<IQQ", _read_exact(fh, _HEADER_BYTES)[4:])
        try:
            for _ in range(n_kv):
                key = _read_str(fh)
                value = _read_value(fh, _unpack(fh, "<I"))
                if value is not None:
                    meta[key] = value
        except (struct.error, EOFError, ValueError) as exc:
            raise ModelNotFoundError(f"{path}: unreadable GGUF metadata ({exc})") from exc
    return meta


def gguf_quantisation(path: Path) -> str:
    """Quantisation name ("Q4_1", "Q4_K_M", ...) from general.file_type, or "unknown"."""
    file_type = gguf_metadata(path).get("general.file_type")
    return FILE_TYPES.get(file_type, "unknown") if isinstance(file_type, int) else "unknown"
