"""A checksum per stored row, so one damaged row is found, reported and skipped, not trusted.

Each row of preferences, items and entries carries an 8-byte BLAKE2b digest of its stored
cells (as stored: sealed or packed bytes, or text): text, vectors (an int8 vector's scale
included), ids, content hash and confidence; not the times, which edits change. A row written
before schema 5 has none (NULL) and is checked only by whether it decodes.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from typing import Any

# table -> the cells its checksum covers, in order
CHECKED = {
    "preferences": ("text", "embedding"),
    "items": ("text", "source", "external_id", "content_hash"),
    "entries": ("item_id", "preference_id", "instruction", "embedding", "confidence"),
}


def _cell(value: Any) -> bytes:
    if isinstance(value, str):
        tag, data = b"s", value.encode("utf-8", "surrogatepass")
    elif isinstance(value, (bytes, bytearray, memoryview)):
        tag, data = b"b", bytes(value)
    elif isinstance(value, (int, float)):  # a REAL column hands an int back as a float
        tag, data = b"n", struct.pack("<d", float(value))
    elif value is None:
        tag, data = b"0", b""
    else:
        raise TypeError(f"no checksum for a {type(value).__name__} cell")
    return tag + struct.pack("<Q", len(data)) + data


def row_sum(cells: Sequence[Any]) -> bytes:
    """The checksum of one row's checked cells (CHECKED's order)."""
    digest = hashlib.blake2b(digest_size=8, person=b"epic-edge-row")
    for value in cells:
        digest.update(_cell(value))
    return digest.digest()


def intact(cells: Sequence[Any], checksum: bytes | None) -> bool:
    """Whether a row's cells match its checksum (a row without one passes: unchecked)."""
    return checksum is None or row_sum(cells) == bytes(checksum)


def columns(table: str, alias: str = "") -> str:
    """The checked cells of `table` as a SELECT list, e.g. "e.item_id, e.preference_id, ..."."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(prefix + name for name in CHECKED[table])
