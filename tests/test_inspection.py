"""Inspect, edit and move a memory: entries(), forget(), explain(), export / import JSONL."""

from __future__ import annotations

import json
import os
import stat

import pytest

from epic_edge.backends.numpy_index import NumpyIndex
from epic_edge.errors import InvalidInputError
from epic_edge.memory import Memory
from fakes import BagOfWordsEmbedder, KeywordVerifier

VEGAN = "I follow a vegan diet"
HIKING = "I love hiking trails"
ITEMS = [
    {"text": "A vegan diet leaves out meat, dairy and eggs.", "id": "note-1", "source": "a"},
    {"text": "Long hiking trails cross the Alps.", "id": "note-2", "source": "b"},
    {"text": "Quarterly tax filings are due in April.", "id": "note-3", "source": "c"},
]


@pytest.fixture
def filled(fake_memory):
    fake_memory.add_preferences([VEGAN, HIKING])
    fake_memory.ingest(ITEMS)
    return fake_memory


def open_fake(path, embedder=None, **options):
    embedder = embedder or BagOfWordsEmbedder()
    return Memory.open(path, embedder=embedder, verifier=KeywordVerifier(),
                       index=NumpyIndex(embedder.dim), tau=0.2, **options)


def test_package_exports_the_api():
    from epic_edge import Item, Preference
    from epic_edge import Memory as Top

    assert Top is Memory and Item.__name__ == "Item" and Preference.__name__ == "Preference"


def test_a_lone_string_is_one_item_and_one_preference(fake_memory):
    prefs = fake_memory.add_preferences(VEGAN)
    assert [p.text for p in prefs] == [VEGAN]
    stats = fake_memory.ingest("A vegan diet leaves out meat.")
    assert sum(s.seen for s in stats) == 1 and sum(s.kept for s in stats) == 1
    stats = fake_memory.ingest({"text": "Vegan cheese is made of cashews.", "id": "x"})
    assert sum(s.seen for s in stats) == 1


def test_k_is_bounded(filled):
    with pytest.raises(InvalidInputError, match="k must be between 1 and 1000"):
        filled.retrieve("vegan dinner", k=10**9)
    with pytest.raises(InvalidInputError, match="k must be between"):
        filled.retrieve("vegan dinner", k=0)


def test_entries_pages_and_filters(filled):
    entries = filled.entries()
    assert [e.external_id for e in entries] == ["note-1", "note-2"]
    first = entries[0]
    assert first.preference.text == VEGAN and "vegan" in first.instruction.lower()
    assert first.source == "a" and 0 < first.confidence <= 1 and first.created_at > 0
    assert [e.external_id for e in filled.entries(offset=1, limit=1)] == ["note-2"]
    assert [e.external_id for e in filled.entries(preference=HIKING)] == ["note-2"]
    assert filled.entries(offset=5) == []
    with pytest.raises(InvalidInputError, match="limit"):
        filled.entries(limit=0)
    with pytest.raises(InvalidInputError, match="no preference"):
        filled.entries(preference="I collect stamps")


def test_forget_by_id_and_by_number_then_only_an_allowed_ingest_judges_again(filled):
    number = filled.entries(preference=HIKING)[0].item_id
    assert filled.forget("note-1") == 1
    assert [e.external_id for e in filled.entries()] == ["note-2"]
    assert filled.forget(number) == 1
    assert filled.entries() == [] and filled.retrieve("vegan food") == []
    assert filled.check().ok
    with pytest.raises(InvalidInputError, match="no item 'note-1'"):
        filled.forget("note-1")
    with pytest.raises(InvalidInputError, match="int or a str"):
        filled.forget(1.5)
    stats = filled.ingest([ITEMS[0]])  # forgotten: not stored again (tests/test_forgetting.py)
    assert stats[0].forgotten == 1 and stats[0].kept == 0
    stats = filled.ingest([ITEMS[0]], allow_forgotten=True)  # asked for: judged and kept again
    assert stats[0].duplicates == 0 and stats[0].kept == 1


def test_forget_takes_the_chunks_of_a_long_item(fake_memory):
    fake_memory.add_preferences([VEGAN])
    # the fake's instructions of chunks look alike
    fake_memory.settings = fake_memory.settings.replace(consolidate_threshold=None)
    long_text = " ".join(f"Vegan meal {n} leaves out meat and dairy." for n in range(70))
    fake_memory.ingest([{"text": long_text, "id": "doc"}])
    chunks = fake_memory.entries()
    assert len(chunks) > 1 and all(e.external_id.startswith("doc#") for e in chunks)
    assert fake_memory.forget("doc") == len(chunks) and fake_memory.entries() == []


def test_explain_each_stage(filled):
    dropped = filled.explain("Quarterly tax filings are due in April.")
    assert dropped.verdict is None and dropped.would_keep == []
    assert "coarse filter" in dropped.why and all(not r["passes"] for r in dropped.similarities)
    kept = filled.explain("A vegan diet leaves out meat, dairy and eggs.")
    vegan_id = next(p.id for p in filled.preferences() if p.text == VEGAN)
    assert kept.would_keep == [vegan_id] and kept.stored_under == [vegan_id]
    assert kept.verdict["keep"] and kept.p_keep == 0.9
    assert kept.similarities[0]["text"] == VEGAN and kept.similarities[0]["passes"]
    filled.verifier.keywords[VEGAN] = ["tofu"]  # passes the filter, the verifier says no
    refused = filled.explain("A vegan diet leaves out meat, dairy and eggs today.")
    assert refused.candidates and refused.would_keep == [] and "verifier" in refused.why
    assert json.dumps(refused.as_dict())
    with pytest.raises(InvalidInputError, match="empty"):
        filled.explain("   ")
    assert len(filled.entries()) == 2  # explain stores nothing


def test_export_import_round_trip_reuses_vectors(filled, tmp_path):
    path = tmp_path / "me.jsonl"
    counts = filled.export_jsonl(path)
    assert counts == {"preferences": 2, "items": 2, "entries": 2, "forgotten": 0}
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    header = json.loads(path.read_text().splitlines()[0])
    assert header["format"] == "epic-edge-memory" and header["embedder"] == "bow:256"
    with open_fake(tmp_path / "new.epic") as other:
        result = other.import_jsonl(path)
        assert result["entries"] == 2 and result["reembedded"] == 0
        assert [e.as_dict() | {"entry_id": 0, "item_id": 0} for e in other.entries()] == \
            [e.as_dict() | {"entry_id": 0, "item_id": 0} for e in filled.entries()]
        assert other.retrieve("vegan food")[0].item_text == ITEMS[0]["text"]
        assert other.check().ok
        again = other.import_jsonl(path)  # importing twice adds nothing
        assert again["preferences"] == 0 and len(other.entries()) == 2 and other.check().ok


def test_a_forgotten_item_stays_forgotten_through_backup_and_restore(filled, tmp_path):
    old = tmp_path / "before.jsonl"
    filled.export_jsonl(old)  # a backup that still holds note-1
    filled.forget("note-1")
    path = tmp_path / "after.jsonl"
    assert filled.export_jsonl(path)["forgotten"] == 1
    with open_fake(tmp_path / "new.epic") as other:
        result = other.import_jsonl(path)
        assert result["forgotten"] == 1 and result["forgotten_not_carried"] == 0
        assert [e.external_id for e in other.entries()] == ["note-2"]
        assert other.ingest([ITEMS[0]])[0].forgotten == 1  # the tombstone came along
        stale = other.import_jsonl(old)  # an older backup does not bring it back
        assert stale["skipped_forgotten"] == 1 and stale["entries"] == 1
        assert [e.external_id for e in other.entries()] == ["note-2"] and other.check().ok
    assert filled.import_jsonl(old)["skipped_forgotten"] == 1  # nor into the memory itself
    assert [e.external_id for e in filled.entries()] == ["note-2"]
    assert filled.import_jsonl(old, allow_forgotten=True)["skipped_forgotten"] == 0  # asked
    assert sorted(e.external_id for e in filled.entries()) == ["note-1", "note-2"]
    assert filled.ingest([ITEMS[0]])[0].forgotten == 0 and filled.check().ok  # tombstone gone


def test_tombstones_made_under_another_key_are_reported_not_applied(filled, tmp_path):
    pytest.importorskip("cryptography")
    from epic_edge.crypto import Sealer

    filled.forget("note-1")
    path = tmp_path / "after.jsonl"
    filled.export_jsonl(path)
    with open_fake(tmp_path / "secret.epic", key=Sealer.new_key()) as other:
        result = other.import_jsonl(path)
        assert result["forgotten"] == 0 and result["forgotten_not_carried"] == 1
        assert other.check().ok


def test_import_reembeds_for_another_embedder(filled, tmp_path):
    path = tmp_path / "me.jsonl"
    filled.export_jsonl(path)
    with open_fake(tmp_path / "new.epic", BagOfWordsEmbedder(dim=128, name="other")) as other:
        result = other.import_jsonl(path)
        assert result["reembedded"] == 2 and other.check().ok
        assert other.retrieve("hiking trails")[0].item_text == ITEMS[1]["text"]


def test_import_follows_the_target_memorys_entry_vector(filled, tmp_path):
    path = tmp_path / "me.jsonl"
    filled.export_jsonl(path)
    other_kind = "instruction" if filled.store.entry_vector == "item" else "item"
    with open_fake(tmp_path / "other.epic", entry_vector=other_kind) as other:
        assert other.import_jsonl(path)["reembedded"] == 2 and other.check().ok
        hit = other.retrieve("hiking trails", steer=False)[0]
        indexed_text = hit.item_text if other_kind == "item" else hit.instruction
        assert hit.item_text == ITEMS[1]["text"]
        assert hit.score == pytest.approx(float(other.embedder.embed([indexed_text])[0]
                                                @ other.embedder.embed(["hiking trails"])[0]),
                                          abs=0.01)  # int8 vectors


@pytest.mark.parametrize("lines, message", [
    (['{"format": "something-else", "version": 1}'], "not an epic-edge memory export"),
    (['{"format": "epic-edge-memory", "version": 1}', "{not json"], "line 2: not valid JSON"),
    (['{"format": "epic-edge-memory", "version": 1}',
      '{"kind": "entry", "item": 1, "preference": 1, "instruction": "x", "confidence": 1}'],
     "item not listed"),
    (['{"format": "epic-edge-memory", "version": 1}',
      '{"kind": "preference", "id": "a", "text": "x"}'], "field 'id'"),
    (['{"format": "epic-edge-memory", "version": 3}'], "version 1 or 2"),
    (['{"format": "epic-edge-memory", "version": 2}', '{"kind": "forgotten", "hash": "xyz"}'],
     "not a content hash"),
])
def test_a_bad_export_writes_nothing(fake_memory, tmp_path, lines, message):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InvalidInputError, match=message):
        fake_memory.import_jsonl(path)
    assert fake_memory.preferences() == [] and fake_memory.info()["items"] == 0
    with pytest.raises(InvalidInputError, match="does not exist"):
        fake_memory.import_jsonl(tmp_path / "missing.jsonl")


def test_an_encrypted_memory_exports_with_its_key_only(tmp_path):
    pytest.importorskip("cryptography")
    from epic_edge.crypto import Sealer
    from epic_edge.errors import MemoryFileError

    key = Sealer.new_key()
    embedder = BagOfWordsEmbedder()
    with Memory.open(tmp_path / "secret.epic", embedder=embedder, verifier=KeywordVerifier(),
                     index=NumpyIndex(embedder.dim), tau=0.2, key=key) as memory:
        memory.add_preferences([VEGAN])
        memory.ingest([ITEMS[0]])
        memory.export_jsonl(tmp_path / "secret.jsonl")
    assert ITEMS[0]["text"] in (tmp_path / "secret.jsonl").read_text()
    with pytest.raises(MemoryFileError, match="encrypted"):
        open_fake(tmp_path / "secret.epic")


def test_forget_by_id_in_an_encrypted_memory(tmp_path):
    """With a key, item ids are stored as keyed hashes; forget finds an item and its chunks."""
    pytest.importorskip("cryptography")
    from epic_edge.crypto import Sealer

    with open_fake(tmp_path / "secret.epic", key=Sealer.new_key()) as memory:
        memory.add_preferences([VEGAN])
        memory.settings = memory.settings.replace(consolidate_threshold=None)
        long_text = " ".join(f"Vegan meal {n} leaves out meat and dairy." for n in range(70))
        memory.ingest([ITEMS[0], {"text": long_text, "id": "doc"}])
        entries = memory.entries()
        assert len(entries) > 2 and "note-1" not in {e.external_id for e in entries}
        assert memory.forget("doc") == len(entries) - 1
        assert memory.forget("note-1") == 1 and memory.entries() == [] and memory.check().ok
