"""Tests of the shipped sample data loaders and of read_items on user files."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from epic_edge.datasets import (
    load_prefeval,
    load_prefwiki,
    load_sample_corpus,
    load_sample_persona,
    read_items,
)
from epic_edge.errors import InvalidInputError
from epic_edge.types import Item


def test_sample_corpus_loads() -> None:
    items = load_sample_corpus()
    assert 250 <= len(items) <= 350
    assert all(isinstance(it, Item) for it in items)
    ids = [it.id for it in items]
    assert len(set(ids)) == len(ids)
    assert all(i.startswith("wiki:") and "#" in i for i in ids)
    assert all(it.text.strip() for it in items)
    assert all(len(it.text.split()) <= 100 for it in items)
    assert all(it.source.startswith("https://en.wikipedia.org/wiki/") for it in items)
    assert " " not in "".join(it.source for it in items)


def test_sample_persona_shape() -> None:
    persona = load_sample_persona()
    assert persona["dataset"] == "PrefWiki"
    prefs = persona["preferences"]
    assert len(prefs) == 10 and all(isinstance(p, str) and p for p in prefs)
    questions = persona["questions"]
    assert 6 <= len(questions) <= 8
    golds = [q["gold_preference_index"] for q in questions]
    assert all(isinstance(g, int) and 0 <= g < len(prefs) for g in golds)
    assert len(set(golds)) >= 6  # spread over different preferences
    assert all(q["question"].strip() for q in questions)


def test_persona_matches_prefwiki() -> None:
    persona = load_sample_persona()
    source = next(p for p in load_prefwiki() if p["persona_index"] == persona["persona_index"])
    blocks = source["preference_blocks"]
    assert persona["preferences"] == [b["preference"] for b in blocks]
    for q in persona["questions"]:
        block = blocks[q["gold_preference_index"]]
        assert q["question"] in [x["question"] for x in block["queries"]]


def test_benchmark_sets_load() -> None:
    prefwiki, prefeval = load_prefwiki(), load_prefeval()
    assert len(prefwiki) == len(prefeval) == 57
    assert sum(len(b["queries"]) for p in prefwiki for b in p["preference_blocks"]) == 2850
    assert sum(len(b["queries"]) for p in prefeval for b in p["preference_blocks"]) == 570


def test_read_items_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    path.write_text(
        json.dumps({"text": "First item", "source": "s1", "id": "a"}) + "\n"
        + "\n"
        + json.dumps({"text": "Second item"}) + "\n"
        + json.dumps("A bare string item") + "\n"
        + json.dumps({"text": "Numeric id", "id": 7}) + "\n",
        encoding="utf-8",
    )
    items = list(read_items(path))
    assert items == [
        Item("First item", "s1", "a"),
        Item("Second item", "items.jsonl:3", ""),
        Item("A bare string item", "items.jsonl:4", ""),
        Item("Numeric id", "items.jsonl:5", "7"),
    ]


def test_read_items_plain_text(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("line one\n\n   \n  line two  \r\nline three", encoding="utf-8")
    items = list(read_items(path))
    assert [it.text for it in items] == ["line one", "line two", "line three"]
    assert [it.source for it in items] == ["notes.txt:1", "notes.txt:4", "notes.txt:5"]


def test_read_items_json_text_in_txt_file_is_plain(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text('{"text": "x"}\n', encoding="utf-8")
    assert [it.text for it in read_items(path)] == ['{"text": "x"}']


def test_read_items_uppercase_extension_is_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "ITEMS.JSONL"
    path.write_text('{"text": "x"}\n', encoding="utf-8")
    assert [it.text for it in read_items(path)] == ["x"]


def test_read_items_non_utf8_is_replaced_with_warning(tmp_path: Path) -> None:
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"caf\xe9 au lait\nplain ascii\n\xff\xfe broken\n")
    with pytest.warns(UnicodeWarning, match="2 line"):
        items = list(read_items(path))
    assert [it.text for it in items] == ["caf\ufffd au lait", "plain ascii", "\ufffd\ufffd broken"]


def test_read_items_valid_utf8_gives_no_warning(tmp_path: Path) -> None:
    path = tmp_path / "ok.jsonl"
    path.write_bytes("\ufeff".encode() + json.dumps({"text": "café"}).encode() + b"\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [it.text for it in read_items(path)] == ["café"]


@pytest.mark.parametrize("bad_line", [
    '{"text": "unterminated',
    '{"source": "no text field"}',
    '{"text": 42}',
    '[1, 2, 3]',
    '{"text": "   "}',
    '{"text": "x", "source": ["not", "a", "string"]}',
])
def test_read_items_malformed_line_names_file_and_line(tmp_path: Path, bad_line: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"text": "fine"}\n"also fine"\n' + bad_line + "\n", encoding="utf-8")
    items = read_items(path)
    assert next(items).text == "fine"
    assert next(items).text == "also fine"
    with pytest.raises(InvalidInputError, match=r"bad\.jsonl, line 3"):
        next(items)
