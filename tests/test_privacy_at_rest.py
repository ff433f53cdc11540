"""Privacy at rest: sealed vectors and ids, owner-only files, keys for the CLI, read-only opens."""

from __future__ import annotations

import base64
import os
import sqlite3
import stat

import pytest

from epic_edge.backends.numpy_index import NumpyIndex
from epic_edge.cli import main
from epic_edge.crypto import Sealer
from epic_edge.errors import MemoryFileError
from epic_edge.memory import Memory
from epic_edge.vectors import encode
from fakes import BagOfWordsEmbedder, KeywordVerifier

PREFERENCE = "managing my type 2 diabetes"
ITEM = {"text": "diabetes friendly dinner: lentils and greens", "id": "clinic-note-4471"}


def _open(path, key=None, vector_format="float32", read_only=False):
    emb = BagOfWordsEmbedder()
    return Memory.open(path, embedder=emb, verifier=KeywordVerifier(), index=NumpyIndex(emb.dim),
                       tau=0.1, key=key, vector_format=vector_format, read_only=read_only)


def _raw(path) -> bytes:
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))


def _build(path, key, vector_format="float32"):
    with _open(path, key, vector_format) as memory:
        memory.add_preference(PREFERENCE)
        memory.ingest([ITEM])
        hit = memory.retrieve("diabetes dinner")[0]
    return hit, hit.instruction


# -- case 6: vectors and ids sealed with a key ----------------------------------------------
@pytest.mark.parametrize("vector_format", ["float32", "int8"])
def test_with_a_key_vectors_and_ids_are_not_in_clear(tmp_path, vector_format):
    path, key = tmp_path / "m.epic", Sealer.new_key()
    hit, instruction = _build(path, key, vector_format)
    emb = BagOfWordsEmbedder()
    # what an entry may be indexed by (linux-cpu: the item's own vector)
    pref_vector, item_vector, instruction_vector = emb.embed([PREFERENCE, ITEM["text"],
                                                              instruction])
    raw = _raw(path)
    assert encode(pref_vector, "float32") not in raw  # a guessed preference cannot be matched
    assert encode(item_vector, vector_format) not in raw
    assert encode(instruction_vector, vector_format) not in raw
    assert ITEM["id"].encode() not in raw
    with _open(path, key) as memory:  # decrypted at open into the in-memory index
        again = memory.retrieve("diabetes dinner")[0]
        assert (again.item_text, again.score) == (hit.item_text, pytest.approx(hit.score))
        assert memory.check().ok
        stats = memory.ingest([{"text": ITEM["text"] + " and beans", "id": ITEM["id"]}])
        assert stats[0].replaced == 1  # ids still match when an item returns


@pytest.mark.parametrize("vector_format", ["float32", "int8"])
def test_without_a_key_the_entry_vector_is_in_clear(tmp_path, vector_format):
    """The control: the scan above finds the item's vector when nothing seals it."""
    path = tmp_path / "m.epic"
    _build(path, None, vector_format)
    item_vector = BagOfWordsEmbedder().embed([ITEM["text"]])[0]
    assert encode(item_vector, vector_format) in _raw(path)


def _as_schema_2(path, key):
    """Rewrite a keyed file as epic-edge wrote it before vectors and ids were sealed."""
    sealer = Sealer(key)
    conn = sqlite3.connect(path)
    for table in ("preferences", "entries"):
        rows = conn.execute(f"SELECT id, embedding FROM {table}").fetchall()
        conn.executemany(f"UPDATE {table} SET embedding=? WHERE id=?",
                         [(sealer.open_bytes(blob), i) for i, blob in rows])
    conn.execute("UPDATE items SET external_id=?", (ITEM["id"],))
    conn.execute("UPDATE meta SET value='2' WHERE key='schema_version'")
    for table in ("preferences", "items", "entries"):  # row checksums came with schema 5
        conn.execute(f"ALTER TABLE {table} DROP COLUMN checksum")
    conn.commit()
    conn.close()


def test_a_keyed_file_from_before_is_read_and_sealed_on_open(tmp_path):
    path, key = tmp_path / "m.epic", Sealer.new_key()
    hit, _ = _build(path, key)
    _as_schema_2(path, key)
    assert ITEM["id"].encode() in _raw(path)
    with _open(path, key, read_only=True) as memory:  # read-only reads the old layout
        assert memory.retrieve("diabetes dinner")[0].item_text == hit.item_text
    assert ITEM["id"].encode() in _raw(path)
    with _open(path, key) as memory:  # a writer seals it
        assert memory.retrieve("diabetes dinner")[0].item_text == hit.item_text
        assert memory.check().ok
    assert ITEM["id"].encode() not in _raw(path)
    assert encode(BagOfWordsEmbedder().embed([PREFERENCE])[0]) not in _raw(path)
    with pytest.raises(MemoryFileError, match="encrypted"):
        _open(path)


# -- case 7: owner-only files and a key for the CLI ------------------------------------------
def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_new_files_and_folders_are_owner_only(tmp_path):
    old = os.umask(0o022)
    try:
        path = tmp_path / "new" / "deeper" / "m.epic"
        with _open(path) as memory:
            memory.add_preference(PREFERENCE)
            memory.ingest([ITEM])
            files = [p for p in path.parent.iterdir()]
            assert {p.name for p in files} >= {"m.epic", "m.epic-wal", "m.epic-shm"}
            assert {p.name: _mode(p) for p in files} == {p.name: 0o600 for p in files}
        assert _mode(tmp_path / "new") == 0o700 and _mode(path.parent) == 0o700
    finally:
        os.umask(old)


def test_cli_reads_a_key_from_the_environment_or_an_owner_only_file(tmp_path, monkeypatch,
                                                                      capsys):
    from epic_edge.cli.common import memory_key

    key = Sealer.new_key()
    monkeypatch.setenv("EPIC_EDGE_KEY", key.hex())
    assert memory_key(None) == key
    monkeypatch.setenv("EPIC_EDGE_KEY", base64.b64encode(key).decode())
    assert memory_key(None) == key
    monkeypatch.setenv("EPIC_EDGE_KEY", "not a key")
    with pytest.raises(MemoryFileError, match="EPIC_EDGE_KEY"):
        memory_key(None)
    monkeypatch.delenv("EPIC_EDGE_KEY")
    assert memory_key(None) is None
    key_file = tmp_path / "memory.key"
    key_file.write_text(key.hex() + "\n")
    key_file.chmod(0o644)
    with pytest.raises(MemoryFileError, match="chmod 600"):
        memory_key(key_file)
    key_file.chmod(0o600)
    assert memory_key(key_file) == key
    key_file.write_bytes(key)
    assert memory_key(key_file) == key
    with pytest.raises(SystemExit):  # never the key itself on a command line
        main(["prefs", "ls", "--key", key.hex()])
    assert "unrecognized arguments: --key" in capsys.readouterr().err


def test_keygen_writes_an_owner_only_key_file(tmp_path, capsys):
    from epic_edge.cli.common import memory_key

    key_file = tmp_path / "keys" / "memory.key"
    assert main(["keygen", str(key_file)]) == 0
    assert _mode(key_file) == 0o600 and len(memory_key(key_file)) == 32
    assert main(["keygen", str(key_file)]) == 2  # never overwrites a key
    assert "exists" in capsys.readouterr().err


# -- case 8: read-only commands write nothing ------------------------------------------------
def _foreign_file(path):
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.execute("INSERT INTO notes VALUES ('another app owns this')")
    conn.commit()
    conn.close()


@pytest.mark.parametrize("command", [["check"], ["info"], ["query", "what to eat?"],
                                     ["prefs", "ls"]])
def test_read_only_commands_leave_a_foreign_file_alone(tmp_path, capsys, command):
    path = tmp_path / "other-app.sqlite"
    _foreign_file(path)
    before = path.read_bytes()
    code = main([*command, "--memory", str(path)])
    assert code == 2 and "not an epic-edge memory file" in capsys.readouterr().err
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other-app.sqlite"]  # no -wal/-shm
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()


@pytest.mark.parametrize("command", [["check"], ["info"], ["query", "what to eat?"],
                                     ["prefs", "ls"]])
def test_read_only_commands_do_not_create_a_missing_file(tmp_path, capsys, command):
    path = tmp_path / "absent" / "m.epic"
    assert main([*command, "--memory", str(path)]) == 2
    assert "no memory file" in capsys.readouterr().err
    assert not (tmp_path / "absent").exists()


def test_read_only_open_of_a_memory_writes_nothing(tmp_path):
    path = tmp_path / "m.epic"
    _build(path, None)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with _open(path, read_only=True) as memory:
        assert memory.check().ok and memory.info()["entries"] == 1
        assert memory.retrieve("diabetes dinner")
        with pytest.raises(MemoryFileError):
            memory.add_preference("something new")
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name in before}
    assert after == before
