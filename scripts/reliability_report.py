"""Regenerate RELIABILITY.md: kill runs, fuzz cases, concurrency runs, verification faults,
second-order faults, concurrent edits, eviction behaviour, privacy at rest, network.

    .venv/bin/python scripts/reliability_report.py [--kills 100] [--concurrency 5]

Runs the same harnesses as the test suite (tests/crash_harness.py, tests/fault_harness.py,
tests/second_order_harness.py, tests/second_order_cli.py, tests/test_fuzz.py,
tests/test_concurrency.py, tests/test_privacy_at_rest.py, tests/network_watch.py), at full
length, and writes RELIABILITY.md at the repo root. The
network section needs the linux-cpu models ($EPIC_EDGE_MODELS) and, to see native code, strace.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("EPIC_FUZZ_EXAMPLES", "1000")

import privacy_report  # noqa: E402
import test_concurrency  # noqa: E402
import test_fuzz  # noqa: E402
from crash_harness import open_fake_memory, run_kill_trials  # noqa: E402
from fault_harness import run_concurrent_edits, run_verification_faults  # noqa: E402
from hypothesis.stateful import run_state_machine_as_test  # noqa: E402
from second_order_cli import CLI_CASES  # noqa: E402
from second_order_harness import CASES, OTHER  # noqa: E402


def machine() -> str:
    return (f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"{platform.system()} {platform.release()}, load average "
            f"{os.getloadavg()[0]:.1f} at start")


def fuzz(rounds: int) -> tuple[int, int, list[str]]:
    """Run the suite's property tests with 1,000 examples each (and the state machine)."""
    crashes, messages = 0, []
    runs = [test_fuzz.test_expand_yields_clean_items_or_skips,
            test_fuzz.test_questions_give_hits_or_a_clear_error,
            lambda: run_state_machine_as_test(test_fuzz.MemoryMachine,
                                              settings=test_fuzz.MACHINE_SETTINGS)]
    for _ in range(rounds):
        for run in runs:
            try:
                run()
            except Exception as exc:  # a failing property counts as a crash
                crashes += 1
                messages.append(repr(exc)[:300])
    return sum(test_fuzz.CASES.values()), crashes, messages


def concurrency(runs: int) -> tuple[int, int, list[str]]:
    passed, failures = 0, []
    for n in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            try:
                test_concurrency.test_readers_in_other_processes_see_commits_without_errors(
                    Path(tmp))
                passed += 1
            except Exception:
                failures.append(f"run {n}: {traceback.format_exc(limit=2)[-300:]}")
    return passed, runs, failures


def verification_faults(rounds: int) -> tuple[str, list[str]]:
    with tempfile.TemporaryDirectory() as tmp:
        stats = run_verification_faults(Path(tmp), rounds)
    rows = "\n".join(f"| {name} | {rounds} | {count} |" for name, count in stats.per_fault.items())
    bad = stats.lost or stats.recorded_as_judged or stats.kept_without_verdict
    notes = ([f"verification faults: {stats.lost} items lost, {stats.recorded_as_judged} "
              f"failed items recorded as judged, {stats.kept_without_verdict} kept without a "
              "verdict"] if bad else [])
    return f"""## Faults during verification

Each run ingests one batch of 16 items (2 preferences) with a broken verifier, then again
once it works, and compares the memory with a control that never saw the fault
(tests/fault_harness.py; consolidation off, so the kept items are the verifier's decisions).
A failed item is counted in `BatchStats.failed`, is not recorded as judged, and the next
ingest judges it; a verifier that cannot be built stops the ingest with its message. A
verifier that answers without a probability (a llama.cpp server on loopback answering NaN
log-probabilities, an empty top list, or none of the Keep/Discard words) fails the item the
same way: its answer is no verdict.

| fault | runs | items not judged (failed, or not tried after 3 failures in a row) |
|---|---|---|
{rows}

Runs {stats.runs}; items not judged because of a fault (cases) {stats.failed_items}; of
them recorded as judged **{stats.recorded_as_judged}**; items lost once the fault was fixed
**{stats.lost}**; items kept that the control discarded **{stats.kept_without_verdict}**.
""", notes


def second_order_faults() -> tuple[str, list[str]]:
    """Each case of issue 42 run once, its tally as a row."""
    rows, notes = [], []
    for name, case in {**CASES, **CLI_CASES}.items():
        with tempfile.TemporaryDirectory() as tmp:
            t = case(Path(tmp))
        other = f"{t.other} ({OTHER[case]})" if case in OTHER else str(t.other)
        rows.append(f"| {name} | {t.runs} | **{t.lost}** | **{t.weakened}** | **{t.foreign}** | "
                    f"**{t.tracebacks}** | {other} |")
        if t.lost or t.weakened or t.foreign or t.tracebacks or t.other:
            notes.append(f"{name}: {t}")
    return f"""## Second-order faults

Answers that lie, paths that point elsewhere, bits that flip (tests/second_order_harness.py,
tests/second_order_cli.py; the CLI cases run `epic-edge` in-process over the fake embedder).
Lost: items that should be there and are not (a clear refusal is no loss); weakened: files
epic-edge created or wrote that others may read; foreign: another application's file (SQLite
or text) changed, or a memory created at a path by a command that starts none (only `prefs
add`, `ingest`, `restore` and `serve` do); tracebacks: an error that was not one line.
A damaged row (its cells against its checksum, schema 5) is reported by `check` and left out
by reads; a file from before keeps its rows unchecked.

| case | cases run | items lost | files weakened | foreign files changed | tracebacks | other |
|---|---|---|---|---|---|---|
{chr(10).join(rows)}
""", notes


def concurrent_edits(runs: int) -> tuple[str, list[str]]:
    with tempfile.TemporaryDirectory() as tmp:
        stats = run_concurrent_edits(Path(tmp), runs)
    return f"""## Concurrent edits

Each run: two writer processes ingest the same 30 batches into one file while two editor
processes change its preferences: both add the same new preference each round, and each adds
and removes one of its own (tests/fault_harness.py). A preference removed while a batch is
verified takes that batch's new entries with it; two writers adding one text share one row.

| what | figure |
|---|---|
| runs (4 processes each) | {stats.runs} |
| preference edits (cases) | {stats.edits} |
| ingest batches committed meanwhile | {stats.batches} |
| processes that failed (losses) | **{stats.failed_processes}** |
| "corrupt" alarms | **{stats.corrupt_alarms}** |
| files failing `check` afterwards | {stats.files_failing_check} |
""", stats.errors


def eviction() -> list[str]:
    from crash_harness import PREFERENCES, batch_items

    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        memory = open_fake_memory(str(Path(tmp) / "m.epic"))
        memory.add_preferences(PREFERENCES)
        for n in range(20):
            memory.ingest(batch_items(n))
        before = memory.info()
        lines.append(f"- 20 batches ingested: {before['entries']} entries, "
                     f"{before['footprint']['total']:,} bytes on disk")
        evicted = memory.set_budget(max_entries=100)
        lines.append(f"- entry budget 100: evicted {evicted}, now {memory.info()['entries']} "
                     f"entries; check ok: {memory.check().ok}")
        target = memory.footprint()["total"] * 3 // 4
        evicted = memory.set_budget(max_entries=100, max_bytes=target)
        after = memory.info()
        lines.append(f"- entry budget 100 and byte budget {target:,}: evicted {evicted} more, now "
                     f"{after['entries']} entries and {after['footprint']['total']:,} bytes; "
                     f"check ok: {memory.check().ok}")
        memory.ingest(batch_items(99))
        lines.append(f"- one more batch under the budget: {memory.info()['entries']} entries, "
                     f"{memory.footprint()['total']:,} bytes; evicted in all: "
                     f"{memory.info()['evicted_total']}")
        memory.close()
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kills", type=int, default=100)
    p.add_argument("--fuzz-rounds", type=int, default=2)
    p.add_argument("--concurrency", type=int, default=5)
    p.add_argument("--fault-rounds", type=int, default=3,
                   help="batches per verification fault (5 faults)")
    p.add_argument("--edit-runs", type=int, default=3,
                   help="concurrent-edit runs (2 writers + 2 preference editors each)")
    p.add_argument("--out", type=Path, default=ROOT / "RELIABILITY.md")
    args = p.parse_args()
    start, where = time.time(), machine()
    with tempfile.TemporaryDirectory() as tmp:
        kills = run_kill_trials(args.kills, Path(tmp), seed=7)
    cases, crashes, fuzz_notes = fuzz(args.fuzz_rounds)
    con_ok, con_runs, con_notes = concurrency(args.concurrency)
    faults, fault_notes = verification_faults(args.fault_rounds)
    edits, edit_notes = concurrent_edits(args.edit_runs)
    second, second_notes = second_order_faults()
    evict = eviction()
    at_rest, net = privacy_report.privacy_at_rest(), privacy_report.network()
    text = f"""# Reliability report

Regenerate with `.venv/bin/python scripts/reliability_report.py` (this run: --kills {args.kills}
--fuzz-rounds {args.fuzz_rounds} --concurrency {args.concurrency}
--fault-rounds {args.fault_rounds} --edit-runs {args.edit_runs}; {time.time() - start:.0f} s).
Machine: {where}. Written {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.

| what | figure |
|---|---|
| ingests killed with SIGKILL at a random moment (0.05-2.5 s) | {kills.tried} |
| files that opened and passed `check` afterwards | {kills.survived} / {kills.tried} |
| batches reported committed before the kill | {kills.committed_batches} |
| committed batches lost | **{kills.lost_batches}** |
| duplicates after re-running the whole ingest | {kills.duplicates_after_rerun} |
| property-based cases run (hypothesis: items, questions, state-machine steps) | {cases:,} |
| crashes / property failures | **{crashes}** |
| concurrency runs (2 writer + 2 reader processes) without a reader error | {con_ok} / {con_runs} |

How: the writer (tests/crash_harness.py) ingests 30 batches of 16 items through the fake
embedder and keyword verifier, printing each batch number after its commit; the harness kills
it, opens the file, runs the integrity check (SQLite integrity, foreign keys, embeddings decode
with the right dim and norm, index = rows), checks that every reported batch is there, then
re-runs the whole ingest and compares with an uninterrupted reference run.
The file uses WAL with synchronous=FULL, so a commit is on disk before the writer reports it.

{faults}
{second}
{edits}
## Eviction (budget) behaviour

Policy: entries a verifier floor kept below its threshold go first (lowest confidence first);
then evict from the preference holding the most entries (each preference keeps a fair
share), its lowest confidence x 0.5^(age / half-life) first (half-life 30 days by default),
ties to the older entry; items left without an entry go with them; the file
is vacuumed so its size follows. Size is the pages the content uses (page count less free
pages, WAL frames included, so a reader in another process that keeps the WAL from being
checkpointed neither inflates it nor stalls a batch that fits), measured after a vacuum in
each round that evicts, which packs the rows left (rows deleted from a page that still holds
others free no page until then), so a round evicts about what the overshoot is worth.
A byte budget cannot go below the file's fixed floor
(SQLite pages of each table and index, the preferences, the table of judged items: about 60 KB
here); below it every entry goes and the file stays at the floor.

{chr(10).join(evict)}

## Privacy at rest

With a key, text, vectors and item ids are sealed (AES-GCM; ids and content hashes keyed
HMACs); each cell counts the stored values whose clear bytes occur in the file and its WAL.

{chr(10).join(at_rest)}

## Network

{chr(10).join(net)}
"""
    notes = fuzz_notes + con_notes + fault_notes + second_notes + edit_notes
    if notes:
        text += "\n## Failures\n\n" + "\n".join(f"- {n}" for n in notes) + "\n"
    args.out.write_text(text, encoding="utf-8")
    print(text)
    return 1 if notes or kills.lost_batches else 0


if __name__ == "__main__":
    sys.exit(main())
