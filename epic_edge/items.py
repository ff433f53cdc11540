"""Turning what an app hands to ingest() into clean Items, by documented rules."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator
from typing import Any

from epic_edge.chunking import chunk_text
from epic_edge.errors import InvalidInputError
from epic_edge.types import Item

log = logging.getLogger(__name__)

# Rule for long items: more than MAX_ITEM_WORDS words -> ~CHUNK_WORDS-word chunks on sentence
# boundaries (the paper's chunking), each ingested as its own item "<id>#<n>" (no id when the
# item has none).
MAX_ITEM_WORDS = 300
CHUNK_WORDS = 100
# Rule for huge items: only the first MAX_ITEM_CHARS characters are read (about 1,700 chunks);
# the rest is dropped with a warning that names no content.
MAX_ITEM_CHARS = 1_000_000


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _control_free(text: str) -> str:
    """Drop control characters other than whitespace (NULs and escapes break prompts)."""
    return _CONTROL.sub("", text)


_SURROGATE = re.compile("[\ud800-\udfff]")


def without_surrogates(text: str, what: str = "an item") -> str:
    """Replace lone surrogates (JSON "\\ud800", undecodable command-line bytes) with U+FFFD:
    they are not Unicode text and cannot be encoded, hashed or stored."""
    if not _SURROGATE.search(text):
        return text
    log.warning("%s held lone surrogates (not Unicode text); they were replaced with U+FFFD",
                what)
    return _SURROGATE.sub("\ufffd", text)


def checked_id(item_id: str, where: str = "an item") -> str:
    """An item's id as given; InvalidInputError when it holds lone surrogates. An id is the
    item's identity, so unlike text it cannot take U+FFFD for them: two ids would become one."""
    if _SURROGATE.search(item_id):
        raise InvalidInputError(f"{where}: the id {ascii(item_id)[:80]} holds lone surrogates "
                                "(not Unicode text); give ids as text")
    return item_id


def _optional(value: Any) -> str:
    """An optional field of an item record: absent or None is "" (never the text "None")."""
    return "" if value is None else str(value)


def to_item(raw: Any) -> Item:
    """Coerce str, bytes, Item or {"text", "source", "id"} dict into an Item.

    Bytes that are not UTF-8 are decoded with U+FFFD replacements (and a warning that
    names no content). Anything else raises InvalidInputError.
    """
    if isinstance(raw, Item):
        item = raw
    elif isinstance(raw, str):
        item = Item(raw)
    elif isinstance(raw, (bytes, bytearray)):
        try:
            text = bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            log.warning("an item was not valid UTF-8; undecodable bytes were replaced")
            text = bytes(raw).decode("utf-8", errors="replace")
        item = Item(text)
    elif isinstance(raw, dict):
        if not isinstance(raw.get("text"), str):
            raise InvalidInputError("an item record needs a 'text' field holding a string")
        item = Item(raw["text"], _optional(raw.get("source")), _optional(raw.get("id")))
    else:
        raise InvalidInputError(
            f"items must be str, bytes, Item or dict with 'text'; got {type(raw).__name__}"
        )
    if len(item.text) > MAX_ITEM_CHARS:
        log.warning("an item of %d characters was cut to the first %d", len(item.text),
                    MAX_ITEM_CHARS)
    return Item(without_surrogates(_control_free(item.text[:MAX_ITEM_CHARS])),
                without_surrogates(item.source, "an item's source"), checked_id(item.id))


def expand(items: Iterable[Any]) -> Iterator[Item | None]:
    """Clean items, split long ones into chunks; yields None for an empty item (a skip)."""
    for _, _, item in expand_items(items):
        yield item


def expand_items(items: Iterable[Any]) -> Iterator[tuple[int, str, Item | None]]:
    """expand(), each item with the number of the input it came from and that input's id
    (its chunks' ids are "<id>#<n>"): the id names the item across its versions."""
    for number, raw in enumerate(items):
        item = to_item(raw)
        text = " ".join(item.text.split())
        if not text:
            yield number, item.id, None
            continue
        if len(text.split()) <= MAX_ITEM_WORDS:
            yield number, item.id, Item(text, item.source, item.id)
            continue
        for n, chunk in enumerate(chunk_text(text, CHUNK_WORDS)):
            # an item without an id gives chunks without one: no two documents share "#0"
            yield number, item.id, Item(chunk, item.source, chunk_id(item.id, n))


def chunk_id(item_id: str, n: int) -> str:
    """The id of chunk n of an item: "<id>#<n>"; none for an item without an id."""
    return f"{item_id}#{n}" if item_id else ""


def of_item(stored_id: str, item_id: str) -> bool:
    """Whether a stored (clear) id is `item_id` or one of its chunks' ids."""
    base, mark, n = stored_id.rpartition("#")
    return stored_id == item_id or (bool(mark) and n.isdecimal() and base == item_id)
