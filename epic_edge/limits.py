"""Limits of the public API's input, and the one cleaner of user text that enforces them."""

from __future__ import annotations

from typing import Any

from epic_edge.errors import InvalidInputError
from epic_edge.items import without_surrogates

MAX_PREFERENCE_CHARS = 2_000
MAX_QUESTION_CHARS = 8_000
MAX_PREFERENCES = 1_000  # steering is O(preferences) per query; beyond this, split memories
MAX_K = 1_000  # hits per lookup; the index allocates k slots per query
MAX_BATCH = 100_000  # items per ingest transaction; one batch is held in memory


def clean_text(text: Any, what: str, limit: int) -> str:
    """`text` with whitespace collapsed; InvalidInputError when not a str, empty or too long."""
    if not isinstance(text, str):
        raise InvalidInputError(f"{what} must be a string, got {type(text).__name__}")
    text = " ".join(without_surrogates(text, f"a {what}").split())
    if not text:
        raise InvalidInputError(f"{what} is empty")
    if len(text) > limit:
        raise InvalidInputError(f"{what} is {len(text)} characters; the limit is {limit}")
    return text


def one_or_many(values: Any, single: type | tuple[type, ...]) -> Any:
    """A lone value where an iterable is expected is one value (a str is not its characters)."""
    return [values] if isinstance(values, single) else values
