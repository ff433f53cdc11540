"""Tests of sentence splitting and ~100-word chunk packing."""

from __future__ import annotations

import pytest

from epic_edge.chunking import chunk_text, split_sentences


def _sentence(n_words: int, tag: str) -> str:
    """A sentence of exactly n_words words, starting with an uppercase word and ending in '.'."""
    words = [tag.capitalize()] + [f"{tag}{i}" for i in range(1, n_words)]
    return " ".join(words) + "."


def test_chunks_respect_max_words_and_keep_all_words() -> None:
    text = " ".join(_sentence(n, f"s{i}x") for i, n in enumerate([30, 45, 20, 60, 10, 5, 80]))
    chunks = chunk_text(text, max_words=100)
    assert all(0 < len(c.split()) <= 100 for c in chunks)
    assert " ".join(chunks).split() == text.split()
    # greedy packing: 30+45+20 fit, 60+10+5 fit, 80 alone
    assert [len(c.split()) for c in chunks] == [95, 75, 80]


def test_chunks_end_on_sentence_boundaries() -> None:
    sentences = [_sentence(40, f"w{i}z") for i in range(5)]
    chunks = chunk_text(" ".join(sentences), max_words=100)
    assert chunks == [" ".join(sentences[0:2]), " ".join(sentences[2:4]), sentences[4]]
    assert all(c.endswith(".") for c in chunks)


def test_sentence_rule_terminators_quotes_and_digits() -> None:
    text = 'It rained! Did it? "Yes," she said. "It did." 2001 was a year. (Aside.) Fine.'
    assert split_sentences(text) == [
        "It rained!", "Did it?", '"Yes," she said.', '"It did."', "2001 was a year.",
        "(Aside.)", "Fine.",
    ]


def test_no_split_before_lowercase() -> None:
    assert split_sentences("The value is 3.5 m. and more follows.") == [
        "The value is 3.5 m. and more follows."]


@pytest.mark.parametrize("text", [
    "Spices, e.g. Pepper and cumin, are traded. Next one.",
    "That is, i.e. Nothing at all was left. Next one.",
    "He moved to the U.S. In 1990 he left. Next one.",
    "Dr. Smith met Mr. Jones on St. Patrick's Day. Next one.",
    "Written by Arthur C. Clarke in 1968. Next one.",
])
def test_abbreviations_do_not_split(text: str) -> None:
    sentences = split_sentences(text)
    assert len(sentences) == 2
    assert sentences[1] == "Next one."


def test_long_sentence_is_hard_split_by_words() -> None:
    long = _sentence(250, "long")
    chunks = chunk_text("Short one here. " + long + " After it.", max_words=100)
    assert all(len(c.split()) <= 100 for c in chunks)
    assert chunks[0] == "Short one here."
    assert [len(c.split()) for c in chunks[1:3]] == [100, 100]
    # the last 50 words of the long sentence stay open and the next sentence joins them
    assert chunks[3].split()[-2:] == ["After", "it."]
    assert len(chunks[3].split()) == 52
    assert " ".join(chunks).split() == ("Short one here. " + long + " After it.").split()


def test_long_sentence_exact_multiple() -> None:
    chunks = chunk_text(_sentence(20, "ex"), max_words=10)
    assert [len(c.split()) for c in chunks] == [10, 10]


@pytest.mark.parametrize("text", ["", "   ", "\n\t \r\n"])
def test_empty_or_whitespace_text_gives_no_chunks(text: str) -> None:
    assert chunk_text(text) == []


def test_whitespace_is_normalised() -> None:
    assert chunk_text("  One\n two\t three.\n\nFour  five. ") == ["One two three. Four five."]


def test_invalid_max_words() -> None:
    with pytest.raises(ValueError):
        chunk_text("Some text.", max_words=0)
