"""Readers keep working during a writer's ingest, across processes and threads."""

from __future__ import annotations

import subprocess
import sys
import threading

from crash_harness import BATCHES, PREFERENCES, TESTS, WRITER, batch_items, open_fake_memory
from fault_harness import run_concurrent_edits

READER = f"""
import sys, time
sys.path.insert(0, {str(TESTS)!r})
from crash_harness import open_fake_memory
memory = open_fake_memory(sys.argv[1])
ok = errors = most = 0
deadline = time.time() + float(sys.argv[2])
while time.time() < deadline:
    try:
        most = max(most, len(memory.retrieve("vegan tofu plant cooking", k=50)))
        ok += 1
    except Exception as exc:
        errors += 1
        print("error", type(exc).__name__, exc, file=sys.stderr)
print(ok, errors, most)
"""


def test_readers_in_other_processes_see_commits_without_errors(tmp_path):
    path = tmp_path / "m.epic"
    with open_fake_memory(str(path)) as memory:
        memory.add_preferences(PREFERENCES)
        memory.ingest(batch_items(0))
    readers = [subprocess.Popen([sys.executable, "-c", READER, str(path), "6"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for _ in range(2)]
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for _ in range(2)]  # a second writer waits on SQLite's lock, then proceeds
    for proc in writers:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    for proc in readers:
        out, err = proc.communicate(timeout=300)
        ok, errors, most = map(int, out.split())
        assert errors == 0, err
        assert ok > 0
    with open_fake_memory(str(path)) as memory:
        assert memory.check().ok
        texts = [memory.store.sealer.open(r[0])
                 for r in memory.store.query("SELECT text FROM items")]
        assert len(texts) == len(set(texts))  # two writers, same items: no duplicates
        assert len(memory.retrieve("vegan tofu plant cooking", k=50)) > most // 2


PINNING_READER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN")
conn.execute("SELECT count(*) FROM items").fetchone()  # holds this snapshot: no checkpoint
print("pinned", flush=True)
sys.stdin.read()
"""


BUDGET = 500_000


def _budgeted_ingest(path, pin: bool) -> tuple[int, int]:
    with open_fake_memory(str(path)) as memory:
        memory.set_budget(max_bytes=BUDGET)  # the content stays under it, a pinned WAL not
        memory.add_preferences(PREFERENCES)
        memory.ingest(batch_items(0))
        reader = subprocess.Popen([sys.executable, "-c", PINNING_READER, str(path)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
                                  ) if pin else None
        try:
            assert reader is None or reader.stdout.readline().strip() == "pinned"
            evicted = sum(s.evicted for n in range(1, BATCHES)
                          for s in memory.ingest(batch_items(n)))
        finally:
            if reader is not None:
                reader.communicate(timeout=60)
        return evicted, memory.store.count("entries")


def test_a_reader_holding_a_snapshot_does_not_make_ingest_evict(tmp_path):
    # the pinned WAL grows past the budget; the memory's content does not
    evicted, entries = _budgeted_ingest(tmp_path / "free.epic", pin=False)
    assert evicted == 0 and entries > 0
    assert _budgeted_ingest(tmp_path / "pinned.epic", pin=True) == (0, entries)
    assert not (tmp_path / "pinned.epic-wal").exists()  # checkpointed into the file on close
    assert (tmp_path / "pinned.epic").stat().st_size <= BUDGET


def test_reader_process_picks_up_new_entries(tmp_path):
    path = tmp_path / "m.epic"
    with open_fake_memory(str(path)) as writer, open_fake_memory(str(path)) as reader:
        writer.add_preferences(PREFERENCES)
        assert reader.retrieve("vegan tofu") == []
        writer.ingest(batch_items(1))
        assert reader.retrieve("vegan tofu")  # sees the other connection's commit
        assert len(reader.preferences()) == 2


def test_memory_object_is_safe_to_share_across_threads(tmp_path):
    memory = open_fake_memory(str(tmp_path / "m.epic"))
    memory.add_preferences(PREFERENCES)
    memory.ingest(batch_items(0))
    failures: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            try:
                hits = memory.retrieve("electric battery range", k=5)
                assert all(h.instruction for h in hits)
            except BaseException as exc:  # noqa: BLE001 - collected and re-raised below
                failures.append(exc)
                return

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    for n in range(2, 12):
        memory.ingest(batch_items(n))
    stop.set()
    for t in threads:
        t.join()
    memory.close()
    assert not failures, failures[0]


def test_preference_edits_in_other_processes_never_abort_an_ingest(tmp_path):
    stats = run_concurrent_edits(tmp_path, runs=1)  # 2 writers, 2 editors, one file
    assert stats.errors == [] and stats.corrupt_alarms == 0 and stats.files_failing_check == 0
    assert stats.batches == 60 and stats.edits == 90
