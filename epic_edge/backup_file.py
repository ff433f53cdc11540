"""A memory export (a backup, JSONL) read back: every value checked before anything is written."""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.datasets import bounded_lines, json_value
from epic_edge.errors import InvalidInputError
from epic_edge.items import MAX_ITEM_CHARS, checked_id, without_surrogates
from epic_edge.limits import MAX_PREFERENCE_CHARS, clean_text

FORMAT = "epic-edge-memory"
VERSION = 2  # 2: the tombstones of forgotten items travel ("forgotten" lines)
READS = (1, 2)
TOMBSTONE_PROBE = "epic-edge tombstone probe"  # hashed by the header: do two memories agree?


@dataclass
class Export:
    """A parsed export whose every value was checked: preference texts cleaned, item texts,
    sources and ids as stored, confidences in [0, 1], times finite, and each entry's vector
    (key "vector_values", when the file has one) finite and non-zero with the header's dim."""

    header: dict[str, Any]
    preferences: dict[int, str]
    items: dict[int, dict[str, Any]]
    entries: list[dict[str, Any]]
    forgotten: list[bytes] = field(default_factory=list)  # tombstones (content hashes)


def _field(record: dict[str, Any], name: str, kinds: type | tuple[type, ...], where: str) -> Any:
    value = record.get(name)
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise InvalidInputError(f"{where}: field {name!r} is missing or of the wrong type")
    return value


def _number(record: dict[str, Any], name: str, where: str, low: float = -math.inf,
            high: float = math.inf, optional: bool = False) -> float | None:
    """A finite number in [low, high] (None when optional and absent)."""
    if optional and record.get(name) is None:
        return None
    value = _field(record, name, (int, float), where)
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not (math.isfinite(number) and low <= number <= high):
        raise InvalidInputError(f"{where}: {name!r} is {str(value)[:40]}, not a finite number "
                                f"in [{low:g}, {high:g}]")
    return number


def _text(record: dict[str, Any], name: str, where: str, optional: bool = False) -> str:
    """A string field with lone surrogates replaced (as ingest does); "" when optional."""
    if optional and record.get(name) is None:
        return ""
    return without_surrogates(_field(record, name, str, where), f"an export's {name}")


def vector_values(text: Any, dim: Any, where: str) -> np.ndarray:
    """An entry's vector: base64 of `dim` little-endian float32s, finite and not zero."""
    if not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
        raise InvalidInputError(f"{where}: an entry has a vector but the header no dim")
    try:
        raw = base64.b64decode(text, validate=True)
    except (ValueError, TypeError):
        raise InvalidInputError(f"{where}: \"vector\" is not base64") from None
    if len(raw) != 4 * dim:
        raise InvalidInputError(f"{where}: \"vector\" has {len(raw) / 4:g} values, not {dim}")
    vector = np.frombuffer(raw, "<f4").astype(np.float32)
    if not np.isfinite(vector).all() or not vector.any():
        raise InvalidInputError(f"{where}: \"vector\" is not finite or is all zeros")
    return vector


def hash_value(text: Any, where: str) -> bytes:
    """A content hash as an export writes it (base64 of 16 bytes)."""
    try:
        value = base64.b64decode(text, validate=True)
    except (ValueError, TypeError):
        value = b""
    if len(value) != 16:
        raise InvalidInputError(f"{where} is not a content hash (base64 of 16 bytes)")
    return value


def _entry(record: dict[str, Any], parsed: Export, where: str) -> dict[str, Any]:
    for name in ("item", "preference"):
        _field(record, name, int, where)
    record["instruction"] = _text(record, "instruction", where)
    record["confidence"] = _number(record, "confidence", where, 0.0, 1.0)
    for name in ("created_at", "updated_at"):
        record[name] = _number(record, name, where, optional=True)
    if record["item"] not in parsed.items:
        raise InvalidInputError(f"{where}: entry of an item not listed before it")
    if record["preference"] not in parsed.preferences:
        raise InvalidInputError(f"{where}: entry of an unknown preference")
    if record.get("vector") is not None:
        record["vector_values"] = vector_values(record["vector"], parsed.header.get("dim"), where)
    record["where"] = where
    return record


def _item(record: dict[str, Any], where: str) -> dict[str, Any]:
    record["text"] = _text(record, "text", where)
    if not record["text"].strip():
        raise InvalidInputError(f"{where}: \"text\" is empty")
    if len(record["text"]) > MAX_ITEM_CHARS:
        raise InvalidInputError(f"{where}: \"text\" is longer than {MAX_ITEM_CHARS} characters")
    record["source"] = _text(record, "source", where, optional=True)
    external = record.get("external_id")
    record["external_id"] = checked_id(
        "" if external is None else _field(record, "external_id", str, where), where)
    record["created_at"] = _number(record, "created_at", where, optional=True)
    return record


def read_export(path: str | Path) -> Export:
    """Parse and check a whole export file before anything is written."""
    path = Path(path)
    if not path.is_file():
        raise InvalidInputError(f"{path} does not exist or is not a file")
    parsed = Export({}, {}, {}, [])
    with open(path, "rb") as fh:
        for lineno, raw in bounded_lines(fh, path):
            where = f"{path}, line {lineno}"
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise InvalidInputError(f"{where}: not UTF-8") from None
            if not text.strip():
                continue
            record = json_value(text, where)
            if not isinstance(record, dict):
                raise InvalidInputError(f"{where}: expected a JSON object")
            if lineno == 1:
                if record.get("format") != FORMAT or record.get("version") not in READS:
                    raise InvalidInputError(f"{path} is not an epic-edge memory export "
                                            f"(format {FORMAT!r}, version "
                                            f"{' or '.join(map(str, READS))})")
                parsed.header = record
                continue
            kind = record.get("kind")
            if kind == "preference":
                parsed.preferences[_field(record, "id", int, where)] = clean_text(
                    record.get("text"), f"{where}: preference", MAX_PREFERENCE_CHARS)
            elif kind == "item":
                parsed.items[_field(record, "id", int, where)] = _item(record, where)
            elif kind == "entry":
                parsed.entries.append(_entry(record, parsed, where))
            elif kind == "forgotten":
                parsed.forgotten.append(hash_value(record.get("hash"), f"{where}: \"hash\""))
            else:
                raise InvalidInputError(f"{where}: unknown kind {kind!r}")
    if not parsed.header:
        raise InvalidInputError(f"{path} is empty")
    return parsed
