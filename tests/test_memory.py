"""Memory API over fake backends: preferences, ingest, retrieval, removal, persistence."""

from __future__ import annotations

import numpy as np
import pytest

from epic_edge.backends.numpy_index import NumpyIndex
from epic_edge.errors import EmbedderMismatchError, InvalidInputError, MemoryFileError
from epic_edge.memory import Memory
from epic_edge.types import Item
from epic_edge.vectors import bytes_per_vector
from fakes import BagOfWordsEmbedder, KeywordVerifier

CORPUS = [
    "Electric vehicles use battery packs and electric motors instead of petrol engines",
    "Pickup trucks have an open cargo bed behind the cab",
    "Vegan cooking replaces eggs and dairy with plant foods like tofu",
    "The treaty of Westphalia ended the thirty years war in Europe",
    "Tax law concerns the assessment of income by governments",
]
PREFS = ["I only consider electric vehicles with a battery",
         "I follow a vegan diet with plant foods only"]


@pytest.fixture
def memory(fake_memory):
    fake_memory.add_preferences(PREFS)
    return fake_memory


def test_ingest_keeps_only_items_bearing_on_preferences(memory):
    stats = memory.ingest(CORPUS, batch_size=2)
    assert len(stats) == 3
    kept_texts = {h.item_text for p in PREFS for h in memory.retrieve(p, k=5)}
    assert kept_texts == {CORPUS[0], CORPUS[2]}
    total_seen = sum(s.seen for s in stats)
    assert total_seen == 5 and sum(s.passed_filter for s in stats) < 5
    assert memory.info()["entries"] == 2


def test_verifier_only_sees_coarse_filter_survivors(memory):
    memory.ingest(CORPUS)
    judged = [text for text, _ in memory.verifier.seen]
    assert CORPUS[3] not in judged and CORPUS[4] not in judged


def test_reingest_is_deduplicated(memory):
    judged = sum(s.verified for s in memory.ingest(CORPUS))
    again = memory.ingest(CORPUS + [CORPUS[0]])
    # judged items are skipped (plus the repeat inside the batch); the coarse filter's drops
    # are not recorded, so they are embedded and dropped again at no verifier cost
    assert 0 < judged < len(CORPUS)
    assert sum(s.duplicates for s in again) == judged + 1
    assert sum(s.verified for s in again) == 0
    assert memory.info()["entries"] == 2


def test_judged_items_ledger_stays_bounded(memory, monkeypatch):
    from epic_edge import store_writes

    monkeypatch.setattr(store_writes, "LEDGER_ROWS", 1)
    memory.ingest(CORPUS)
    assert memory.store.count("judged") == 1
    memory.ingest(CORPUS)  # items that left the ledger may be judged again...
    assert memory.store.count("judged") == 1
    assert memory.info()["entries"] == 2  # ...but are never stored twice


def test_schema_1_file_loses_its_old_ledger_and_keeps_its_entries(tmp_path):
    import sqlite3

    path = tmp_path / "old.epic"
    emb = BagOfWordsEmbedder()
    with Memory.open(path, embedder=emb, verifier=KeywordVerifier(), index=NumpyIndex(emb.dim),
                     tau=0.1) as memory:
        memory.add_preferences(PREFS)
        memory.ingest(CORPUS)
        entries = memory.info()["entries"]
    con = sqlite3.connect(path)  # what a schema-1 file looked like
    con.execute("UPDATE meta SET value='1' WHERE key='schema_version'")
    con.execute("CREATE TABLE seen (content_hash BLOB PRIMARY KEY, epoch INTEGER NOT NULL)")
    con.execute("INSERT INTO seen VALUES (x'00', 0)")
    con.commit()
    con.close()
    with Memory.open(path, embedder=emb, verifier=KeywordVerifier(), index=NumpyIndex(emb.dim),
                     tau=0.1) as memory:
        tables = {r[0] for r in memory.store.query("SELECT name FROM sqlite_master")}
        assert "seen" not in tables and "judged" in tables
        assert memory.store.get_meta("schema_version") == "6"  # 2 -> 6: no row changes, no key
        assert memory.info()["entries"] == entries and memory.check().ok
        memory.ingest(CORPUS)  # judged once more: the old ledger is gone
        assert memory.info()["entries"] == entries and memory.store.count("judged") > 0
        assert sum(s.verified for s in memory.ingest(CORPUS)) == 0  # the new ledger works


def test_new_preference_reopens_old_items_for_judgement(memory):
    memory.ingest(CORPUS)
    memory.add_preference("I dislike pickup trucks with a cargo bed")
    stats = memory.ingest(CORPUS)
    assert sum(s.kept for s in stats) == 1  # only the truck passage is new
    hits = memory.retrieve("which pickup trucks have a cargo bed", k=1)
    assert hits[0].item_text == CORPUS[1]
    assert memory.info()["entries"] == 3


def test_retrieve_steers_to_closest_preference_and_returns_hits(memory):
    memory.ingest(CORPUS)
    hits = memory.retrieve("what should I cook tonight with tofu", k=5)
    assert hits[0].preference.text == PREFS[1]
    assert hits[0].item_text == CORPUS[2]
    assert hits == sorted(hits, key=lambda h: -h.score)
    context = memory.context("what should I cook tonight with tofu")
    assert PREFS[1] in context and CORPUS[2] in context and hits[0].instruction in context


def test_remove_preference_drops_only_its_entries(memory):
    memory.add_preference("battery storage and plant foods")
    memory.ingest(CORPUS)
    linked = {e.preference.text for e in memory.entries(limit=100)}
    assert "battery storage and plant foods" in linked
    removed = memory.remove_preference(PREFS[1])
    assert removed >= 1
    hits = memory.retrieve("plant foods tofu", k=10)
    assert all(h.preference.text != PREFS[1] for h in hits)
    # the vegan passage stays while another preference still links to it
    assert CORPUS[2] in {h.item_text for h in hits}
    memory.remove_preference("battery storage and plant foods")
    assert CORPUS[2] not in {h.item_text for h in memory.retrieve("plant foods tofu", k=10)}
    assert memory.info()["items"] == 1
    with pytest.raises(InvalidInputError):
        memory.remove_preference("never added")


def test_persistence_round_trip_gives_identical_results(tmp_path):
    emb = BagOfWordsEmbedder()
    path = tmp_path / "m.epic"
    with Memory.open(path, embedder=emb, verifier=KeywordVerifier(), index=NumpyIndex(256),
                     tau=0.2) as mem:
        mem.add_preferences(PREFS)
        mem.ingest([Item(t, source=f"doc{i}") for i, t in enumerate(CORPUS)])
        before = [mem.retrieve(q) for q in PREFS + ["battery motors", "tofu"]]
    with Memory.open(path, embedder=emb, index=NumpyIndex(256)) as mem:
        after = [mem.retrieve(q) for q in PREFS + ["battery motors", "tofu"]]
        assert mem.tau == 0.2
    assert before == after and before[0][0].source == "doc0"


def test_other_embedder_is_refused(tmp_path):
    path = tmp_path / "m.epic"
    Memory.open(path, embedder=BagOfWordsEmbedder(), index=NumpyIndex(256), tau=0.2).close()
    with pytest.raises(EmbedderMismatchError, match="built with embedder 'bow:256'"):
        Memory.open(path, embedder=BagOfWordsEmbedder(name="other"), index=NumpyIndex(256))


def test_bad_inputs_are_clear_errors_or_defined_skips(memory):
    with pytest.raises(InvalidInputError):
        memory.add_preference("   ")
    with pytest.raises(InvalidInputError):
        memory.retrieve("")
    assert memory.retrieve("anything at all") == []  # before any ingest
    stats = memory.ingest(["", "   ", b"\xff\xfe electric battery vehicles \xff",
                           "x" * (1 << 20)])
    assert stats[0].rejected == 2
    assert any("battery" in h.item_text for h in memory.retrieve("electric battery"))
    with pytest.raises(InvalidInputError):
        memory.ingest([12345])
    with pytest.raises(InvalidInputError):
        memory.ingest(CORPUS, batch_size=0)


def test_huge_item_is_chunked_into_many_items(memory):
    long_text = " ".join(["Electric vehicles store energy in a battery."] * 400)  # 2,800 words
    stats = memory.ingest([long_text])
    assert stats[0].seen > 20  # chunked into ~100-word items
    assert stats[0].duplicates > 0  # identical chunks collapse


def test_empty_preference_list_refuses_ingest(fake_memory):
    with pytest.raises(InvalidInputError, match="add at least one preference"):
        fake_memory.ingest(CORPUS)


def test_not_a_memory_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.epic"
    bad.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(MemoryFileError, match="not an epic-edge memory file"):
        Memory.open(bad, embedder=BagOfWordsEmbedder(), index=NumpyIndex(256), tau=0.2)


def test_footprint_parts_add_up(memory):
    memory.ingest(CORPUS)
    fp = memory.footprint()
    assert memory.store.vector_format == "int8"  # the linux-cpu profile's choice
    assert fp["vectors"] == 2 * bytes_per_vector("int8", 256) == 2 * 260
    assert fp["total"] == sum(v for k, v in fp.items() if k != "total")
    assert fp["items"] > 0 and fp["instructions"] > 0 and fp["preferences"] > 0


def test_fifty_megabyte_item_is_cut_and_chunked(memory, caplog):
    from epic_edge.items import MAX_ITEM_CHARS

    huge = ("Electric vehicles store energy in a battery pack. " * 1_000_000)[: 50 << 20]
    stats = memory.ingest([huge], batch_size=4096)
    seen = sum(s.seen for s in stats)
    assert 0 < seen <= MAX_ITEM_CHARS // 300  # chunks of the first MAX_ITEM_CHARS only
    assert "was cut" in caplog.text and "Electric" not in caplog.text


def test_control_characters_are_removed(memory):
    memory.ingest(["electric\x00 battery\x1b[31m vehicles \x07"])
    hit = memory.retrieve("electric battery vehicles")[0]
    assert hit.item_text == "electric battery[31m vehicles"


def test_huge_and_duplicate_preference_lists(memory, monkeypatch):
    import epic_edge.limits as memory_module

    first = memory.add_preference("I like trains")
    assert memory.add_preference("  I like   trains ") == first  # duplicate: same preference
    monkeypatch.setattr(memory_module, "MAX_PREFERENCES", len(memory.preferences()) + 2)
    memory.add_preferences(["pref a", "pref b"])
    with pytest.raises(InvalidInputError, match="at most"):
        memory.add_preference("one too many")
    assert len(memory.preferences()) == memory_module.MAX_PREFERENCES


@pytest.mark.parametrize("kind", ["item", "instruction", "item+instruction"])
def test_entries_are_indexed_by_the_chosen_vector(tmp_path, kind):
    embedder = BagOfWordsEmbedder()
    with Memory.open(tmp_path / "m.epic", embedder=embedder, verifier=KeywordVerifier(),
                     index=NumpyIndex(embedder.dim), tau=0.2, entry_vector=kind,
                     vector_format="float32") as memory:
        memory.add_preferences(PREFS)
        memory.ingest(CORPUS)
        ids, vectors = memory.store.entry_vectors(embedder.dim)
        rows = memory.store.entries_by_id(ids)
        items = embedder.embed([rows[int(i)][3] for i in ids])
        instructions = embedder.embed([rows[int(i)][1] for i in ids])
        expected = {"item": items, "instruction": instructions,
                    "item+instruction": (items + instructions) / np.linalg.norm(
                        items + instructions, axis=1, keepdims=True)}[kind]
        assert len(ids) >= 2 and np.allclose(vectors, expected, atol=1e-6)
    # the choice is the file's: reopening with another one keeps it
    with Memory.open(tmp_path / "m.epic", embedder=embedder, verifier=KeywordVerifier(),
                     index=NumpyIndex(embedder.dim), tau=0.2, entry_vector="item") as memory:
        assert memory.store.entry_vector == kind
    with pytest.raises(InvalidInputError, match="entry_vector"):
        Memory.open(tmp_path / "other.epic", embedder=embedder, index=NumpyIndex(embedder.dim),
                    tau=0.2, entry_vector="title")


def test_item_gate_gives_an_implicit_question_its_memory(tmp_path):
    embedder = BagOfWordsEmbedder()
    with Memory.open(tmp_path / "m.epic", embedder=embedder, verifier=KeywordVerifier(),
                     index=NumpyIndex(embedder.dim), tau=0.2, entry_vector="item") as memory:
        memory.add_preferences(PREFS)
        memory.ingest(CORPUS)
        question = "Which battery packs and motors"  # shares words with an item, not a pref
        sim = memory.lookup(question, gate=-1.0).similarity
        # the preference test alone refuses it
        memory.settings = memory.settings.replace(gate=sim + 0.1)
        assert not memory.lookup(question).used_memory
        # the kept item is evidence enough
        memory.settings = memory.settings.replace(item_gate=0.3)
        found = memory.lookup(question)
        assert found.used_memory and "battery packs" in found.hits[0].item_text
        unrelated = memory.lookup("The treaty of Westphalia")  # coarse filter dropped it
        assert not unrelated.used_memory and "best entry" in unrelated.reason
