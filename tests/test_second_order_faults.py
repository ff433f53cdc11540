"""Second-order faults (issue 42): each case loses nothing, weakens no file, changes no other
application's file and prints no traceback (the harnesses count; RELIABILITY.md shows them)."""

from __future__ import annotations

import sqlite3

import pytest
from crash_harness import open_fake_memory
from second_order_cli import CLI_CASES, fake_backed_cli
from second_order_harness import CASES, ITEMS, PREF

from epic_edge.schema import SCHEMA_VERSION

ALL_CASES = {**CASES, **CLI_CASES}


@pytest.mark.parametrize("case", list(ALL_CASES))
def test_second_order_fault_case_loses_nothing(tmp_path, case):
    tally = ALL_CASES[case](tmp_path)
    assert tally.runs >= 3
    assert (tally.lost, tally.weakened, tally.foreign, tally.tracebacks, tally.other) == (
        0, 0, 0, 0, 0), tally.notes


@pytest.mark.parametrize("command", [["budget", "--max-entries", "3"], ["forget", "x"],
                                     ["prefs", "rm", "1"], ["budget"]])
def test_commands_that_start_no_memory_name_the_missing_path(tmp_path, command):
    path = tmp_path / "typo" / "m.epic"
    with fake_backed_cli() as cli:
        code, err = cli(*command, "--memory", path)
    assert code == 2 and err.count("\n") == 1 and f"no memory file at {path}" in err
    assert not (tmp_path / "typo").exists()


def test_a_damaged_text_is_reported_by_check_and_left_out_by_reads(tmp_path):
    path = tmp_path / "m.epic"
    with open_fake_memory(str(path)) as memory:
        memory.add_preference(PREF)
        memory.ingest(ITEMS)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE items SET text = CAST(text AS BLOB) || X'00' WHERE id = 2")  # a cut
    conn.execute("UPDATE items SET source = 'elsewhere' WHERE id = 3")  # a changed cell
    conn.commit()
    conn.close()
    with open_fake_memory(str(path)) as memory:
        problems = memory.check().problems
        assert [p.split(":")[0] for p in problems] == [
            "items row 2 is damaged", "items row 3 is damaged"]
        assert not any("encrypted" in p for p in problems)
        assert len(memory.entries()) == len(ITEMS) - 2
        assert len(memory.retrieve("vegan tofu dish", k=10, gate=-1.0)) == len(ITEMS) - 2


def test_a_file_from_before_row_checksums_reads_unchecked_and_upgrades(tmp_path):
    path = tmp_path / "m.epic"
    with open_fake_memory(str(path)) as memory:
        memory.add_preference(PREF)
        memory.ingest(ITEMS[:2])
    conn = sqlite3.connect(path)  # what schema 4 wrote: no checksum column
    for table in ("preferences", "items", "entries"):
        conn.execute(f"ALTER TABLE {table} DROP COLUMN checksum")
    conn.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with open_fake_memory(str(path), read_only=True) as memory:
        assert memory.check().ok and len(memory.entries()) == 2
    with open_fake_memory(str(path)) as memory:
        assert memory.store.get_meta("schema_version") == str(SCHEMA_VERSION) == "6"
        memory.ingest(ITEMS[2:])
        assert memory.check().ok and len(memory.entries()) == len(ITEMS)
        unchecked = memory.store.query("SELECT COUNT(*) FROM items WHERE checksum IS NULL")
        assert unchecked == [(2,)]
