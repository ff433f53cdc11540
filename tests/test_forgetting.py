"""Forgetting that lasts (tombstones) and what `remember` says became of an item."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest

from epic_edge.backends.numpy_index import NumpyIndex
from epic_edge.errors import InvalidInputError
from epic_edge.memory import Memory
from fakes import BagOfWordsEmbedder, KeywordVerifier

VEGAN = "I follow a vegan diet"
HIKING = "I love hiking trails"
FEED = [
    {"text": "A vegan bistro serves lentil stew and oat milk desserts.", "id": "n1"},
    {"text": "Long hiking trails cross the Alps between mountain huts.", "id": "n2"},
    {"text": "Quarterly tax filings are due in April.", "id": "n3"},
]
LONG = " ".join(f"Vegan meal {n} leaves out meat and dairy." for n in range(70))


def open_memory(path, key=None):
    embedder = BagOfWordsEmbedder()
    verifier = KeywordVerifier({VEGAN: ["vegan"], HIKING: ["hiking"]})
    return Memory.open(path, embedder=embedder, verifier=verifier, index=NumpyIndex(embedder.dim),
                       tau=0.2, key=key)


@pytest.fixture(params=[None, bytes(range(32))], ids=["plain", "encrypted"])
def memory(request, tmp_path):
    with open_memory(tmp_path / "m.epic", request.param) as opened:
        opened.add_preferences([VEGAN, HIKING])
        opened.ingest(FEED)
        yield opened


def stored_texts(memory):
    return sorted(e.item_text for e in memory.entries())


def test_a_forgotten_item_stays_gone_when_its_feed_comes_again(memory):
    hit = memory.retrieve("vegan bistro dinner", k=1)[0]
    assert hit.item_text == FEED[0]["text"] and memory.forget(hit.item_id) == 1
    stats = memory.ingest(FEED)  # the same feed, after the ledger forgot it too
    assert sum(s.forgotten for s in stats) == 1 and sum(s.kept for s in stats) == 0
    assert stored_texts(memory) == [FEED[1]["text"]]
    assert memory.info()["items_forgotten"] == 1 and memory.footprint()["forgotten"] == 16
    # asked for: stored again, and its tombstone goes (a later feed needs no flag)
    assert sum(s.kept for s in memory.ingest(FEED, allow_forgotten=True)) == 1
    assert memory.info()["items_forgotten"] == 0 and len(stored_texts(memory)) == 2


def test_every_chunk_of_a_forgotten_long_item_stays_gone(memory):
    # the chunks' template instructions look alike
    memory.settings = memory.settings.replace(consolidate_threshold=None)
    memory.ingest([{"text": LONG, "id": "doc"}])
    chunks = len(memory.entries()) - 2
    assert chunks > 1 and memory.forget("doc") == chunks
    assert sum(s.forgotten for s in memory.ingest([{"text": LONG, "id": "doc"}])) == chunks
    assert len(memory.entries()) == 2


def test_tombstones_are_keyed_with_the_memorys_key(tmp_path):
    key = bytes(range(32))
    with open_memory(tmp_path / "k.epic", key) as memory:
        memory.add_preference(VEGAN)
        memory.ingest(FEED[:1])
        memory.forget("n1")
        plain = hashlib.sha256(FEED[0]["text"].encode()).digest()[:16]
        stored = memory.store.query("SELECT hash FROM forgotten")
        assert len(stored) == 1 and bytes(stored[0][0]) != plain
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert plain not in raw and b"bistro" not in raw


def test_remember_says_where_an_item_was_filed_or_why_it_was_dropped(memory):
    kept = memory.remember({"text": "Vegan ramen with miso broth.", "id": "r1"})
    assert kept.kept and kept.stats.seen == 1
    filed = kept.items[0]
    assert filed.stage == "kept" and filed.external_id == "r1" and filed.p_keep == 0.9
    assert [p.text for p in filed.preferences] == [VEGAN] and filed.entry_ids
    assert [e.item_id for e in memory.entries() if e.item_text.startswith("Vegan ramen")] == [
        filed.item_id]
    far = memory.remember("Quarterly tax filings are due in June.").items[0]
    assert not far.kept and far.stage == "coarse filter" and "tau 0.200" in far.reason
    judged = memory.remember("I follow a diet of trails.").items[0]  # near, no keyword
    assert not judged.kept and judged.stage == "verifier" and judged.reason == "no keyword"
    again = memory.remember(FEED[1]).items[0]
    assert again.kept and again.stage == "already judged" and "already in the memory" in (
        again.reason)
    memory.forget("r1")
    gone = memory.remember({"text": "Vegan ramen with miso broth.", "id": "r1"}).items[0]
    assert not gone.kept and gone.stage == "forgotten" and "allow_forgotten" in gone.reason
    back = memory.remember({"text": "Vegan ramen with miso broth."}, allow_forgotten=True)
    assert back.kept
    for empty in ("", "   ", {"text": " \n "}):
        with pytest.raises(InvalidInputError, match="text is empty"):
            memory.remember(empty)


def test_hits_name_their_item_so_it_can_be_forgotten(memory):
    hit = memory.retrieve("hiking trails in the Alps", k=1)[0]
    entry = next(e for e in memory.entries() if e.entry_id == hit.entry_id)
    assert (hit.item_id, hit.external_id) == (entry.item_id, entry.external_id)
    # with a key the stored id is a keyed hash: forget takes the id or that hash
    assert memory.forget(hit.external_id) == 1
    assert hit.item_text not in [h.item_text for h in memory.retrieve("hiking trails")]


def test_a_schema_4_file_reads_and_upgrades(tmp_path):
    path = tmp_path / "old.epic"
    with open_memory(path) as memory:
        memory.add_preference(VEGAN)
        memory.ingest(FEED)
    with sqlite3.connect(path) as con:  # what schema 4 wrote: no tombstones
        con.execute("DROP TABLE forgotten")
        con.execute("UPDATE meta SET value='4' WHERE key='schema_version'")
    embedder = BagOfWordsEmbedder()
    with Memory.open(path, embedder=embedder, index=NumpyIndex(embedder.dim), tau=0.2,
                     read_only=True) as old:
        assert old.info()["items_forgotten"] == 0 and old.footprint()["forgotten"] == 0
    with open_memory(path) as memory:
        assert memory.store.get_meta("schema_version") == "6"
        memory.forget("n1")
        assert sum(s.forgotten for s in memory.ingest(FEED)) == 1 and memory.check().ok
