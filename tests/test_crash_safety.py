"""SIGKILL during ingest never corrupts the file or loses a committed batch."""

from __future__ import annotations

import sqlite3

import pytest
from crash_harness import run_kill_trials

from epic_edge.errors import MemoryFileError
from epic_edge.memory import Memory
from fakes import BagOfWordsEmbedder


def test_kill_loop_short(tmp_path):
    """CI's short loop; `pytest -m slow` runs 60 kills, scripts/reliability_report.py 100."""
    stats = run_kill_trials(8, tmp_path, seed=1)
    assert stats.survived == stats.tried == 8
    assert stats.committed_batches > 0  # some kills landed after commits began
    assert stats.lost_batches == 0 and stats.duplicates_after_rerun == 0


@pytest.mark.slow
def test_kill_loop_long(tmp_path):
    stats = run_kill_trials(60, tmp_path, seed=2)
    assert stats.survived == 60 and stats.lost_batches == 0


def _fake(path, **kw):
    return Memory.open(path, embedder=BagOfWordsEmbedder(), tau=0.1, **kw)


def test_a_creation_killed_before_its_schema_reopens_as_a_memory(tmp_path):
    """A kill between the WAL switch (which writes the header) and the schema's commit leaves
    a SQLite file that holds nothing: the next open finishes the memory; a file with another
    application's table is still refused."""
    path = tmp_path / "m.epic"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.close()
    assert path.stat().st_size > 0
    before = path.read_bytes()
    with pytest.raises(MemoryFileError, match="holds nothing yet.*open it once for writing"):
        _fake(path, read_only=True)
    assert path.read_bytes() == before
    with _fake(path) as memory:
        memory.add_preferences(["I follow a vegan diet"])
    with _fake(path) as memory:
        assert [p.text for p in memory.preferences()] == ["I follow a vegan diet"]
    other = tmp_path / "other.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.close()
    with pytest.raises(MemoryFileError, match="another application"):
        _fake(other)


def test_truncated_file_is_a_clear_error(tmp_path):
    path = tmp_path / "m.epic"
    with _fake(path) as memory:
        memory.add_preferences([f"preference number {i} about topic {i}" for i in range(200)])
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(MemoryFileError, match="corrupt|unreadable|integrity"):
        _fake(path)


def test_garbage_in_the_middle_is_a_clear_error(tmp_path):
    path = tmp_path / "m.epic"
    with _fake(path) as memory:
        memory.add_preferences([f"preference number {i} about topic {i}" for i in range(200)])
    data = bytearray(path.read_bytes())
    data[5000:9000] = b"\xde\xad" * 2000
    path.write_bytes(bytes(data))
    with pytest.raises(MemoryFileError):
        _fake(path)


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "m.epic"
    _fake(path).close()
    con = sqlite3.connect(path)
    con.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    con.commit()
    con.close()
    with pytest.raises(MemoryFileError, match="schema version 99"):
        _fake(path)
