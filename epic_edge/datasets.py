"""Loaders for the shipped sample data and benchmark sets, and a reader for users' item files."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any, BinaryIO

from epic_edge.errors import InvalidInputError
from epic_edge.items import checked_id
from epic_edge.types import Item

# Extensions (lower-case) read as JSON Lines; every other file is plain text, one item a line.
JSONL_SUFFIXES: frozenset[str] = frozenset({".jsonl", ".json-lines", ".ndjson"})
# A .json file is a JSON array of items when it starts with "[", else JSON Lines.
JSON_SUFFIX = ".json"
# A line of an input file is read up to this many bytes (an item is read up to 1,000,000
# characters, 6 bytes each at most in JSON): a longer line is refused before it fills memory.
MAX_LINE_BYTES = 8 * 2**20
MAX_JSON_ARRAY_BYTES = 64 * 2**20  # a .json array is parsed whole: bigger ones go as JSONL


def _data_text(name: str) -> str:
    """The text of epic_edge/data/<name>, wherever the package is installed."""
    return resources.files("epic_edge").joinpath("data", name).read_text(encoding="utf-8")


def load_sample_corpus() -> list[Item]:
    """The ~300 Wikipedia chunks of the demo corpus (see epic_edge/data/ATTRIBUTION.md)."""
    items = []
    for line in _data_text("sample_corpus.jsonl").splitlines():
        if line.strip():
            row = json.loads(line)
            items.append(Item(text=row["text"], source=row.get("source", ""), id=row["id"]))
    return items


def load_sample_persona() -> dict[str, Any]:
    """The demo persona: {persona_index, dataset, preferences, questions[question, gold index]}."""
    return json.loads(_data_text("sample_persona.json"))


def load_prefwiki() -> list[dict[str, Any]]:
    """EPIC's PrefWiki set: 57 personas x 10 preference blocks x 5 questions (CC BY-NC 4.0)."""
    return json.loads(_data_text("prefwiki.json"))


def load_prefeval() -> list[dict[str, Any]]:
    """EPIC's PrefEval set: the same 57 personas, one PrefEval question per block (CC BY-NC 4.0)."""
    return json.loads(_data_text("prefeval.json"))


def bounded_lines(f: BinaryIO, path: Path | str) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes) of each line of a binary file; InvalidInputError for a line of
    more than MAX_LINE_BYTES bytes, read no further than that."""
    lineno = 0
    while raw := f.readline(MAX_LINE_BYTES + 1):
        lineno += 1
        if len(raw) > MAX_LINE_BYTES:
            raise InvalidInputError(f"{path}, line {lineno}: longer than {MAX_LINE_BYTES:,} "
                                    "bytes; split it into items (one is read up to "
                                    "1,000,000 characters)")
        yield lineno, raw


def json_value(text: str | bytes, where: str) -> Any:
    """json.loads, with bad JSON (and JSON nested too deeply to parse) an InvalidInputError."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})"
                                ) from None
    except RecursionError:
        raise InvalidInputError(f"{where}: JSON nested too deeply") from None


def _decoded_lines(f: BinaryIO, where: str, bad_lines: list[int]) -> Iterator[tuple[int, str]]:
    """(line number, text) for each line of a binary stream (a file, standard input); lines
    that are not UTF-8 are decoded with errors="replace" and their numbers appended to
    `bad_lines`."""
    for lineno, raw in bounded_lines(f, where):
        if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("utf-8", errors="replace")
            bad_lines.append(lineno)
        yield lineno, text.rstrip("\r\n")


def _field(value: Any, name: str, where: str) -> str:
    """An optional string field of a JSONL object ("" when absent; numbers become strings)."""
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise InvalidInputError(f"{where}: field {name!r} must be a string, "
                                f"got {type(value).__name__}")
    return str(value)


def _jsonl_item(line: str, where: str, default_source: str) -> Item:
    """One Item from one JSON line: an object with "text" (and "source"/"id"), or a string."""
    value = json_value(line, where)
    if isinstance(value, str):
        text, source, item_id = value, default_source, ""
    elif isinstance(value, dict):
        if "text" not in value:
            raise InvalidInputError(f"{where}: JSON object has no \"text\" field")
        if not isinstance(value["text"], str):
            raise InvalidInputError(f"{where}: \"text\" must be a string, "
                                    f"got {type(value['text']).__name__}")
        text = value["text"]
        source = _field(value.get("source"), "source", where) or default_source
        item_id = checked_id(_field(value.get("id"), "id", where), where)
    else:
        raise InvalidInputError(f"{where}: expected a JSON object with \"text\" or a JSON "
                                f"string, got {type(value).__name__}")
    if not text.strip():
        raise InvalidInputError(f"{where}: \"text\" is empty")
    return Item(text=text, source=source, id=item_id)


def read_items(path: Path | str, fmt: str = "auto") -> Iterator[Item]:
    """Stream the items of a user file, lazily, one per non-blank line.

    Format by extension: ``.jsonl`` / ``.json-lines`` / ``.ndjson`` (any case) are JSON Lines,
    each line an object with "text" and optional "source" and "id", or a bare JSON string;
    ``.json`` is a JSON array of such values when its first character is "[", else JSON
    Lines; anything else is plain text, one item per line (surrounding whitespace stripped).
    Blank lines are skipped. An item without a "source" gets ``<file name>:<line number>``.
    `fmt` "jsonl" or "text" reads every file so, whatever its extension.

    Bytes that are not valid UTF-8 are decoded with ``errors="replace"`` (U+FFFD) and one
    UnicodeWarning, at the end, says how many lines were affected and which came first; this
    never raises. A malformed JSON line raises InvalidInputError naming the file and line.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if fmt == "auto" and suffix == JSON_SUFFIX and _starts_with(path, b"["):
        yield from _json_array_items(path)
        return
    if fmt == "auto":
        fmt = "jsonl" if suffix in JSONL_SUFFIXES or suffix == JSON_SUFFIX else "text"
    with open(path, "rb") as lines:
        yield from read_lines(lines, str(path), path.name, fmt)


def read_lines(lines: BinaryIO, where: str, name: str, fmt: str = "auto"
               ) -> Iterator[Item]:
    """The items of a stream of lines (a file, standard input), one per non-blank line, as
    read_items reads them: `fmt` "jsonl", "text", or "auto" (JSON Lines when the first
    non-blank line starts with "{", else text). Sources default to ``<name>:<line number>``."""
    if fmt not in ("auto", "jsonl", "text"):
        raise InvalidInputError(f"unknown format {fmt!r}; choose auto, jsonl or text")
    bad_lines: list[int] = []
    for lineno, line in _decoded_lines(lines, where, bad_lines):
        if not line.strip():
            continue
        if fmt == "auto":
            fmt = "jsonl" if line.lstrip().startswith("{") else "text"
        default_source = f"{name}:{lineno}"
        if fmt == "jsonl":
            yield _jsonl_item(line, f"{where}, line {lineno}", default_source)
        else:
            yield Item(text=line.strip(), source=default_source)
    if bad_lines:
        shown = ", ".join(str(n) for n in bad_lines[:5]) + (", ..." if len(bad_lines) > 5 else "")
        warnings.warn(f"{where}: {len(bad_lines)} line(s) were not valid UTF-8 (lines {shown}); "
                      "undecodable bytes were replaced with U+FFFD", UnicodeWarning, stacklevel=2)


def _starts_with(path: Path, prefix: bytes) -> bool:
    """Whether the file's first byte that is not whitespace (or a BOM) is `prefix`."""
    with open(path, "rb") as f:
        head = f.read(4096).removeprefix(b"\xef\xbb\xbf").lstrip()
    return head.startswith(prefix)


def _json_array_items(path: Path) -> Iterator[Item]:
    """The items of a .json file holding one JSON array (objects with "text", or strings)."""
    if path.stat().st_size > MAX_JSON_ARRAY_BYTES:
        raise InvalidInputError(f"{path}: a JSON array of over {MAX_JSON_ARRAY_BYTES:,} bytes; "
                                "write the items as JSON Lines (.jsonl), one a line")
    try:
        values = json_value(path.read_text(encoding="utf-8-sig"), str(path))
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{path}: not a valid JSON array ({exc})") from None
    if not isinstance(values, list):
        raise InvalidInputError(f"{path}: expected a JSON array of items")
    for n, value in enumerate(values, start=1):
        yield _jsonl_item(json.dumps(value), f"{path}, element {n}", f"{path.name}:{n}")
