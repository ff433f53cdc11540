"""Second-order faults (issue 42), counted: answers that lie, paths that point elsewhere, bits
that flip, stale versions, identity (used by tests and reports; CLI cases: second_order_cli)."""

from __future__ import annotations

import contextlib
import io
import os
import sqlite3
import stat
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from crash_harness import open_fake_memory
from fault_harness import ANSWERS_WITHOUT_A_PROBABILITY, run_verification_faults

from epic_edge.errors import EpicEdgeError
from epic_edge.types import Item

PREF = "I follow a vegan diet and cook tofu"


@dataclass
class Tally:
    """One case's runs and what went wrong in them (every count must be 0)."""

    runs: int = 0
    lost: int = 0  # items gone that should be there (silently: a refusal is not a loss)
    weakened: int = 0  # files readable by others (mode & 077) that epic-edge created or wrote
    foreign: int = 0  # files that are not memories changed, or memories made where none was
    tracebacks: int = 0  # errors that escaped as something other than a one-line error
    other: int = 0  # the case's own wrong result (see OTHER)
    notes: list[str] = field(default_factory=list)

    @contextlib.contextmanager
    def run(self, name: str) -> Iterator[None]:
        """One scenario: counted, and any exception but a one-line error is a traceback."""
        self.runs += 1
        try:
            yield
        except EpicEdgeError:
            pass
        except Exception:  # noqa: BLE001 - counted as what it is, then reported
            self.tracebacks += 1
            self.notes.append(f"{name}: {traceback.format_exc(limit=1).splitlines()[-1][:200]}")


def open_to_others(*paths: Path) -> int:
    """How many of these files (that exist) others may read or write."""
    return sum(1 for p in paths if p.exists() and stat.S_IMODE(p.stat().st_mode) & 0o077)


def _texts(memory) -> set[str]:  # type: ignore[no-untyped-def]
    return {e.item_text for e in memory.entries(0, 1000)}


def _memory(path: Path, **kwargs):  # type: ignore[no-untyped-def]
    memory = open_fake_memory(str(path), **kwargs)
    memory.add_preference(PREF)
    return memory


# -- 1. a verifier that answers, but without a probability --------------------------------------

def lying_verifier(workdir: Path) -> Tally:
    stats = run_verification_faults(workdir, 1, only=ANSWERS_WITHOUT_A_PROBABILITY)
    return Tally(runs=stats.runs, lost=stats.lost,
                 other=stats.recorded_as_judged + stats.kept_without_verdict)


# -- 2. a memory path through a symlink ---------------------------------------------------------

def symlinked_paths(workdir: Path) -> Tally:
    tally, old = Tally(), os.umask(0o022)
    try:
        for n, how in enumerate(("dangling", "dangling into a missing folder", "to a memory",
                                 "through a symlinked folder")):
            base = workdir / f"link{n}"
            base.mkdir()
            target = base / ("missing/m.epic" if "missing" in how else "m.epic")
            link = base / "link.epic"
            if how == "to a memory":
                _memory(target).close()
            if how.startswith("through"):
                (base / "real").mkdir()
                (base / "dir").symlink_to(base / "real")
                target, link = base / "real" / "m.epic", base / "dir" / "m.epic"
            else:
                link.symlink_to(target)
            with tally.run(how), _memory(link) as memory:
                memory.ingest(["vegan tofu curry with rice"])
                sidecars = [Path(f"{target}-wal"), Path(f"{target}-shm")]
                tally.weakened += open_to_others(target, *sidecars)
                tally.lost += 1 - len(_texts(memory))
    finally:
        os.umask(old)
    return tally


# -- 4. one flipped bit in one stored cell ------------------------------------------------------

ITEMS = [Item(f"A vegan tofu dish, number {n}, served with {w} for a weeknight dinner at home",
              id=f"dish-{n}")
         for n, w in enumerate(("rice and beans and greens", "noodles", "lentil soup",
                                "miso glaze", "crispy seitan bites"))]
# scenario -> (table, column, vector format, key?): the cell of row 1 that is damaged
FLIPS = {
    "item text (packed)": ("items", "text", "float32", False),
    "item text (sealed)": ("items", "text", "float32", True),
    "item text (no longer UTF-8)": ("items", "text+utf8", "float32", False),
    "item id": ("items", "external_id", "float32", False),
    "preference vector (sign)": ("preferences", "embedding", "float32", False),
    "entry vector (int8 value)": ("entries", "embedding", "int8", False),
    "entry vector (int8 scale)": ("entries", "embedding+scale", "int8", False),
    "entry confidence": ("entries", "confidence", "float32", False),
    "entry instruction": ("entries", "instruction", "float32", False),
}


def _flip(value: object, column: str) -> object:
    if isinstance(value, float):
        return -value if value else 0.5
    if isinstance(value, str):
        return value[:-1] + chr(ord(value[-1]) ^ 1)
    data = bytearray(value)  # type: ignore[arg-type]
    where = {"embedding": len(data) - 1, "embedding+scale": 2}.get(column, len(data) // 2)
    data[where] ^= 0x80 if column.startswith("embedding") else 0x04
    return bytes(data)


def flipped_bits(workdir: Path) -> Tally:
    tally = Tally()
    for n, (name, (table, column, fmt, keyed)) in enumerate(FLIPS.items()):
        path = workdir / f"flip{n}.epic"
        key = os.urandom(32) if keyed else None
        with _memory(path, key=key, vector_format=fmt) as memory:
            memory.ingest(ITEMS)
            expected = _texts(memory)
        survived, missed = 0, 1
        with tally.run(name):
            conn = sqlite3.connect(path)
            cell = column.partition("+")[0]
            row = 1 if table != "preferences" else conn.execute("SELECT MIN(id) FROM preferences"
                                                                ).fetchone()[0]
            value = conn.execute(f"SELECT {cell} FROM {table} WHERE id=?", (row,)).fetchone()[0]
            if column.endswith("utf8"):  # a TEXT cell whose bytes no longer decode
                conn.execute(f"UPDATE {table} SET {cell} = CAST({cell} AS BLOB) || X'ff' "
                             "WHERE id=?", (row,))
            else:
                conn.execute(f"UPDATE {table} SET {cell}=? WHERE id=?", (_flip(value, column), row))
            conn.commit()
            conn.close()
            with open_fake_memory(str(path), key=key, vector_format=fmt) as memory:
                missed = int(memory.check().ok)
                survived = len(_texts(memory) & expected)
                memory.retrieve("vegan tofu noodles", gate=-1.0)  # reads, no traceback
        tally.other += missed  # check said ok, or the memory did not open
        damaged = 1 if table != "preferences" else len(expected)  # its entries go with it
        tally.lost += max(0, len(expected) - damaged - survived)
    return tally


# -- 5. stale versions -------------------------------------------------------------------------

def _long(topic: str, sentences: int) -> str:
    return " ".join(f"Sentence {n} on vegan tofu and {topic}." for n in range(sentences))


# scenario -> the batches ingested: the item under id "L" is what the last one says
EDITS: dict[str, list[list[Item]]] = {
    "short to long": [[Item("vegan tofu short note", id="L")], [Item(_long("rice", 60), id="L")]],
    "long to short": [[Item(_long("rice", 60), id="L")], [Item("vegan tofu short note", id="L")]],
    "long to shorter long": [[Item(_long("rice", 80), id="L")], [Item(_long("miso", 40), id="L")]],
    "one id twice in a batch": [[Item("vegan tofu first", id="L"),
                                 Item("vegan tofu second", id="L")]],
    "one id twice, long then short": [[Item(_long("rice", 60), id="L"),
                                       Item("vegan tofu second", id="L")]],
}


def stale_versions(workdir: Path) -> Tally:
    """Each edit without a key and with one (ids stored as keyed hashes); then the id is
    forgotten, its chunks with it."""
    tally = Tally()
    for n, (name, batches) in enumerate(EDITS.items()):
        for key in (None, os.urandom(32)):
            path = workdir / f"edit{n}{'-key' if key else ''}.epic"
            with tally.run(name), _memory(path, key=key) as memory:
                for batch in batches:
                    memory.ingest(batch)
                with _memory(path.with_suffix(".control"), key=key) as control:
                    control.ingest([batches[-1][-1]])
                    expected = _texts(control)
                stored = _texts(memory)
                tally.other += len(stored - expected)  # stale versions kept
                tally.lost += len(expected - stored)
                memory.forget("L")
                tally.other += len(_texts(memory))  # a chunk the id did not take with it
    return tally


# -- 7. identity: the id when one is given -----------------------------------------------------

# 20 texts that differ in their last word: their vectors are near-duplicates (cosine > 0.95)
NEAR = " ".join(f"vegan tofu curry step {w}" for w in "abcdefghijklmnopqrst")


def identity(workdir: Path) -> Tally:
    tally = Tally()
    with tally.run("lone surrogates as ids"), _memory(workdir / "ids0.epic") as memory:
        memory.ingest([Item("vegan tofu alpha", id="\ud800")])
        memory.ingest([Item("vegan tofu beta", id="\udfff")])
        tally.lost += 2 - len(_texts(memory))  # accepted, so both must be there
    with tally.run("distinct ids, one text"), _memory(workdir / "ids1.epic") as memory:
        memory.ingest([Item("vegan tofu curry", id="a"), Item("vegan tofu curry", id="b")])
        memory.ingest([Item("vegan tofu curry, edited", id="a")])
        entries = memory.entries(0, 100)
        tally.lost += 1 - sum(e.external_id == "b" for e in entries)
        memory.forget("b")  # a one-line error when b is not there
    with tally.run("near-duplicates, distinct ids"), _memory(workdir / "ids2.epic") as memory:
        memory.ingest([Item(f"{NEAR} variant {n}", id=f"v{n}") for n in range(20)])
        tally.lost += 20 - len({e.external_id for e in memory.entries(0, 100)})
    return tally


CASES: dict[str, Callable[[Path], Tally]] = {
    "verifier answers without a probability (NaN, empty list, no Keep/Discard word)":
        lying_verifier,
    "memory path through a symlink (dangling, missing folder, memory, folder)": symlinked_paths,
    "one damaged cell (text, id, vectors incl. int8 and scale, confidence, instruction)":
        flipped_bits,
    "edits across the chunking limit; one id twice in a batch": stale_versions,
    "identity (surrogate ids, one text under two ids, near-duplicates)": identity,
}
# what `other` counts in each case
OTHER = {lying_verifier: "items judged without a verdict", flipped_bits: "damage check missed",
         stale_versions: "stale versions kept"}


def with_stderr(call: Callable[[], int]) -> tuple[int, str]:
    """call()'s exit status and what it wrote to stderr (its stdout is dropped)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = call()
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, err.getvalue()
