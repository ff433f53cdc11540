"""Packed text in the memory file: round trips, smaller files, old rows, damage, and keys."""

from __future__ import annotations

import sqlite3

import pytest

from epic_edge import text_codec
from epic_edge.backends.numpy_index import NumpyIndex
from epic_edge.crypto import Sealer
from epic_edge.errors import MemoryFileError
from epic_edge.memory import Memory
from fakes import BagOfWordsEmbedder, KeywordVerifier

PREFERENCE = "I only eat vegetarian food and love cooking with beans"
ITEMS = [
    "Bean soup is a vegetarian soup made with dried beans, onions, carrots and celery, "
    "simmered for several hours until the beans are soft; it is served with bread.",
    "Black bean burgers are a vegetarian alternative to beef patties, made from mashed "
    "beans, breadcrumbs, spices and an egg, and they are cooked on a griddle or grill.",
]


def _open(path, key=None):
    emb = BagOfWordsEmbedder()
    return Memory.open(path, embedder=emb, verifier=KeywordVerifier(), index=NumpyIndex(emb.dim),
                       tau=0.05, key=key)


@pytest.mark.parametrize("text", [ITEMS[0], "Grüße aus Köln: Käsespätzle mit Röstzwiebeln " * 3,
                                  "数据 " * 40, "\U0001f600 emoji " * 20])
def test_pack_round_trips_and_is_shorter(text):
    packed = text_codec.pack(text)
    assert packed is not None and text_codec.is_packed(packed)
    assert len(packed) < len(text.encode()) and text_codec.unpack(packed) == text


def test_short_or_random_text_is_left_as_it_is():
    assert text_codec.pack("") is None and text_codec.pack("tofu") is None
    assert text_codec.pack("q8#Zx!v0^Lm2") is None  # nothing to gain
    assert not text_codec.is_packed(b"plain text")


def test_a_damaged_value_is_a_clear_error():
    packed = text_codec.pack(ITEMS[0])
    with pytest.raises(MemoryFileError, match="damaged"):
        text_codec.unpack(packed[:-6])
    with pytest.raises(MemoryFileError, match="damaged"):
        text_codec.unpack(packed[:2] + b"\xff" * (len(packed) - 2))
    with pytest.raises(MemoryFileError, match="damaged"):
        text_codec.unpack(packed + b"tail")


def test_a_memory_stores_item_text_packed_and_reads_it_back(tmp_path):
    path = tmp_path / "m.epic"
    with _open(path) as memory:
        memory.add_preference(PREFERENCE)
        memory.ingest(ITEMS)
        assert sorted(hit.item_text for hit in memory.retrieve("vegetarian beans")) == sorted(ITEMS)
        counted = memory.footprint()["items"]
    with sqlite3.connect(path) as con:
        stored = [row[0] for row in con.execute("SELECT text FROM items")]
    assert all(isinstance(v, bytes) and text_codec.is_packed(v) for v in stored)
    # the footprint counts the packed bytes: less than the texts themselves
    assert counted < sum(len(t.encode()) for t in ITEMS)
    with _open(path) as memory:
        assert {e.item_text for e in memory.entries()} == set(ITEMS)


def test_a_schema_3_file_reads_as_before_and_packs_what_comes_next(tmp_path):
    path = tmp_path / "m.epic"
    with _open(path) as memory:
        memory.add_preference(PREFERENCE)
        memory.ingest(ITEMS[:1])
    with sqlite3.connect(path) as con:  # what schema 3 wrote: plain text
        con.execute("UPDATE items SET text=?", (ITEMS[0],))
        con.execute("UPDATE meta SET value='3' WHERE key='schema_version'")
        for table in ("preferences", "items", "entries"):  # row checksums came with schema 5
            con.execute(f"ALTER TABLE {table} DROP COLUMN checksum")
    with _open(path) as memory:
        assert memory.store.get_meta("schema_version") == "6"
        assert memory.retrieve("vegetarian beans")[0].item_text == ITEMS[0]
        memory.ingest(ITEMS[1:])
        assert {e.item_text for e in memory.entries()} == set(ITEMS)
        assert memory.check().ok
    with sqlite3.connect(path) as con:
        kinds = sorted(type(row[0]).__name__ for row in con.execute("SELECT text FROM items"))
    assert kinds == ["bytes", "str"]


def test_with_a_key_text_is_packed_then_sealed_and_old_sealed_text_still_reads():
    sealer = Sealer(Sealer.new_key())
    sealed = sealer.seal(ITEMS[0])
    assert isinstance(sealed, bytes) and not text_codec.is_packed(sealed)
    assert len(sealed) < len(ITEMS[0].encode())  # packed before it was sealed
    assert sealer.open(sealed) == ITEMS[0]
    assert sealer.open(sealer.seal_bytes(ITEMS[1].encode())) == ITEMS[1]  # schema 3's form
    # without the key it is unreadable; opening the file says so (its key check), so a cell
    # read as such is damage (a key-less file holds no sealed cell)
    with pytest.raises(MemoryFileError, match="damaged"):
        Sealer().open(sealed)
    # a sealed value whose random nonce happens to start like a packed one is still refused
    with pytest.raises(MemoryFileError, match="damaged"):
        Sealer().open(text_codec.MAGIC + sealed[2:])
