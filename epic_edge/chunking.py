"""Sentence-aware chunking of long text into ~100-word passages, as the EPIC paper does."""

from __future__ import annotations

import re

# A sentence may end after ". ! ?" (optionally followed by closing quotes/brackets) when the
# next non-space character starts a new sentence: an uppercase letter, a digit, or an opening
# quote/bracket. The match covers the terminator, the closers and the whitespace.
_BOUNDARY = re.compile(r"""[.!?]+["'\u201d\u2019)\]]*\s+(?=["'\u201c\u2018(\[]?[A-Z0-9])""")

# Words (lower-cased, leading brackets/quotes stripped) after which a period never ends a sentence.
ABBREVIATIONS: frozenset[str] = frozenset({
    "e.g.", "i.e.", "al.", "cf.", "vs.", "viz.", "approx.", "ca.",
    "mr.", "mrs.", "ms.", "dr.", "prof.", "sr.", "jr.", "st.", "mt.", "ft.", "gen.", "col.",
    "lt.", "sgt.", "capt.", "gov.", "sen.", "rep.", "rev.", "hon.", "no.", "nos.", "vol.",
    "fig.", "figs.", "pp.", "ch.", "sec.", "ed.", "eds.", "est.", "jan.", "feb.", "mar.",
    "apr.", "jun.", "jul.", "aug.", "sep.", "sept.", "oct.", "nov.", "dec.", "op.", "bros.",
    "subg.", "subsp.", "sp.", "spp.", "var.", "rp.",
})

# Dotted acronyms ("U.S.", "U.K.", "a.m.") and single-letter initials ("Arthur C. Clarke").
_DOTTED = re.compile(r"^(?:[A-Za-z]\.)+$")
_LEADING_PUNCT = "\"'([{\u201c\u2018"


def _ends_with_abbreviation(text: str) -> bool:
    """True when the last word of `text` (which ends in a period) is a known abbreviation."""
    words = text.rsplit(None, 1)
    if not words:
        return False
    word = words[-1].lstrip(_LEADING_PUNCT)
    return word.lower() in ABBREVIATIONS or bool(_DOTTED.match(word))


def split_sentences(text: str) -> list[str]:
    """Split whitespace-normalised `text` into sentences (see chunk_text for the rule)."""
    text = " ".join(text.split())
    if not text:
        return []
    sentences: list[str] = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        end = match.end()
        head = text[start:match.start() + 1]
        if text[match.start()] == "." and _ends_with_abbreviation(head):
            continue
        sentence = text[start:end].strip()
        if sentence:
            sentences.append(sentence)
        start = end
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences


def chunk_text(text: str, max_words: int = 100) -> list[str]:
    """Pack consecutive sentences of `text` into chunks of at most `max_words` words.

    Sentence rule: a sentence ends after one or more of ``. ! ?`` (plus any closing quotes or
    brackets) followed by whitespace and then an uppercase letter, a digit or an opening
    quote/bracket. A period never ends a sentence when the word it closes is a common
    abbreviation ("e.g.", "i.e.", "Dr.", "St.", "Mr.", "No.", ... see ``ABBREVIATIONS``), a
    dotted acronym ("U.S.", "U.K.") or a single-letter initial ("Arthur C. Clarke"); so a real
    sentence ending in "U.S." is kept together with the next one.

    Packing: sentences are added to the current chunk while it stays within `max_words` words;
    a sentence that would overflow starts a new chunk. A single sentence longer than
    `max_words` is hard-split into runs of `max_words` words; its last, shorter run stays open
    so the following sentences can join it. Whitespace is normalised to single spaces, and
    empty or whitespace-only text gives ``[]``. No chunk is ever empty or longer than
    `max_words` words.
    """
    if max_words < 1:
        raise ValueError(f"max_words must be >= 1, got {max_words}")
    chunks: list[str] = []
    current: list[str] = []  # words of the chunk being built
    for sentence in split_sentences(text):
        words = sentence.split()
        if current and len(current) + len(words) > max_words:
            chunks.append(" ".join(current))
            current = []
        if len(words) > max_words:
            full = len(words) - len(words) % max_words
            for i in range(0, full, max_words):
                chunks.append(" ".join(words[i:i + max_words]))
            words = words[full:]
        current.extend(words)
    if current:
        chunks.append(" ".join(current))
    return chunks
