"""Second-order faults (issue 42) met through the CLI: backups, other applications' files and
missing paths, restores of bad values, input that used to escape as a traceback."""

from __future__ import annotations

import base64
import json
import sqlite3
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

from second_order_harness import PREF, Tally, open_to_others, with_stderr

from epic_edge.backends.numpy_index import NumpyIndex
from epic_edge.cli import main
from epic_edge.datasets import read_items
from epic_edge.memory import Memory
from fakes import BagOfWordsEmbedder, KeywordVerifier


class _FakeBacked(Memory):
    """Memory.open with the fake embedder, verifier and index: the CLI's file handling runs
    as it is, without loading models."""

    @classmethod
    def open(cls, path, profile="linux-cpu", **options):  # type: ignore[no-untyped-def]
        embedder = BagOfWordsEmbedder()
        options.update(embedder=embedder, verifier=KeywordVerifier(),
                       index=NumpyIndex(embedder.dim), tau=0.1)
        return super().open(path, profile, **options)


@contextmanager
def fake_backed_cli() -> Iterator[Callable[..., tuple[int, str]]]:
    """cli(*args) -> (exit status, stderr) of `epic-edge ARGS` over fake backends (and an
    MCP server that returns at once)."""
    served = mock.Mock()  # `serve --mcp` opens its memory, then serves nothing: stdio is ours
    with mock.patch("epic_edge.cli.common.Memory", _FakeBacked), \
            mock.patch("epic_edge.mcp_server.build_server", return_value=served):
        yield lambda *args: with_stderr(lambda: main([str(a) for a in args]))


def _count(tally: Tally, code: int, err: str) -> None:
    """A non-zero exit must be one line, never a traceback."""
    if "Traceback" in err or (code and err.count("\n") != 1):
        tally.tracebacks += 1
        tally.notes.append(err.strip().splitlines()[-1][:200] if err.strip() else "no message")


def _memory_file(cli, path: Path, items: int = 3) -> None:  # type: ignore[no-untyped-def]
    cli("prefs", "add", PREF, "--memory", path)
    source = path.with_suffix(".jsonl")
    source.write_text("".join(json.dumps({"text": f"vegan tofu dish {n}", "id": f"d{n}"}) + "\n"
                              for n in range(items)))
    cli("ingest", source, "--quiet", "--memory", path)


def _memory_and_export(cli, workdir: Path) -> tuple[Path, Path]:  # type: ignore[no-untyped-def]
    """A memory of 3 items and its backup."""
    memory, export = workdir / "m.epic", workdir / "export.jsonl"
    _memory_file(cli, memory)
    cli("backup", export, "--memory", memory)
    return memory, export


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


# -- 3. backup --force onto a file that exists -------------------------------------------------

def backups(workdir: Path) -> Tally:
    tally = Tally()
    with fake_backed_cli() as cli:
        memory = workdir / "m.epic"
        _memory_file(cli, memory)
        for n, how in enumerate(("a 0644 file", "a 0666 file", "a symlink to a 0644 file",
                                 "a new file")):
            out = workdir / f"backup{n}.jsonl"
            if how != "a new file":
                real = workdir / f"real{n}.jsonl" if "symlink" in how else out
                real.write_text("old\n")
                real.chmod(0o666 if "0666" in how else 0o644)
                if real != out:
                    out.symlink_to(real)
            with tally.run(how):
                code, err = cli("backup", out, "--force", "--memory", memory)
                _count(tally, code, err)
                tally.weakened += open_to_others(out.resolve())
                tally.lost += 3 - sum('"kind": "item"' in line for line in
                                      out.read_text().splitlines())
    return tally


# -- 6. another application's file, and a path that holds no memory ----------------------------

WRITERS = [["budget"], ["budget", "--max-entries", "5"], ["serve", "--mcp"],
           ["prefs", "add", "I like tea"], ["prefs", "rm", "1"], ["forget", "x"],
           ["ingest", "ITEMS"], ["restore", "EXPORT"]]
STARTERS = {"serve", "ingest", "restore"}  # with `prefs add`: they may start a memory


def _foreign(path: Path, kind: str) -> None:
    if kind == "text":
        path.write_text("another application's notes\n")
        return
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.execute("INSERT INTO notes VALUES ('another app owns this')")
    conn.commit()
    conn.close()


def foreign_files(workdir: Path) -> Tally:
    tally = Tally()
    with fake_backed_cli() as cli:
        source, export = _memory_and_export(cli, workdir)
        items = source.with_suffix(".jsonl")
        for n, args in enumerate(WRITERS):
            args = [{"ITEMS": items, "EXPORT": export}.get(a, a) for a in args]
            for kind in ("sqlite", "text", "missing"):
                folder = workdir / f"case{n}-{kind}"
                folder.mkdir()
                path = folder / "target.epic"
                if kind != "missing":
                    _foreign(path, kind)
                before = _snapshot(folder)
                with tally.run(f"{' '.join(map(str, args))} on {kind}"):
                    code, err = cli(*args, "--memory", path)
                    _count(tally, code, err)
                starts = args[0] in STARTERS or args[:2] == ["prefs", "add"]
                if kind != "missing" or not starts:
                    tally.foreign += _snapshot(folder) != before
    return tally


# -- 8. restore of bad values -------------------------------------------------------------------

def _bad_exports(export: Path) -> dict[str, list[str]]:
    lines = export.read_text().splitlines()
    entry = next(n for n, line in enumerate(lines) if '"kind": "entry"' in line)

    def with_entry(**changes: object) -> list[str]:
        record = json.loads(lines[entry])
        record.update(changes)
        return [*lines[:entry], json.dumps(record), *lines[entry + 1:]]

    # each export brings a new preference too: a restore that fails part-way leaves it
    lines = [lines[0], json.dumps({"kind": "preference", "id": 77, "text": "I like tea"}),
             *lines[1:]]
    entry += 1
    dim = json.loads(lines[0])["dim"]
    zero = base64.b64encode(bytes(4 * dim)).decode()
    nan = base64.b64encode(b"\x00\x00\xc0\x7f" * dim).decode()
    return {"a NaN vector": with_entry(vector=nan), "a zero vector": with_entry(vector=zero),
            "a vector of the wrong dim": with_entry(vector=zero[:8]),
            "an infinite confidence": [*with_entry()[:entry],
                                       lines[entry].replace('"confidence": 0.9',
                                                            '"confidence": Infinity'),
                                       *lines[entry + 1:]],
            "a confidence of 2": with_entry(confidence=2),
            "a confidence of 10**400": with_entry(confidence=10**400),
            "a NaN time": with_entry(created_at=float("nan")),
            "an id with a lone surrogate": [*lines, json.dumps(
                {"kind": "item", "id": 99, "text": "x", "external_id": "\ud800"})],
            "a bad last line": [*lines, "{not json"]}


def restores(workdir: Path) -> Tally:
    tally = Tally()
    with fake_backed_cli() as cli:
        source, export = _memory_and_export(cli, workdir)
        for n, (name, lines) in enumerate(_bad_exports(export).items()):
            bad = workdir / f"bad{n}.jsonl"
            bad.write_text("\n".join(lines) + "\n")
            for target in ("the same memory", "a new memory"):
                path = source if target == "the same memory" else workdir / f"new{n}.epic"
                before = cli("backup", workdir / "before.jsonl", "--force", "--memory", source)
                snapshot = (workdir / "before.jsonl").read_text().splitlines()[1:]
                with tally.run(f"{name} into {target}"):
                    code, err = cli("restore", bad, "--memory", path)
                    _count(tally, code, err)
                    tally.other += code == 0  # accepted
                cli("backup", workdir / "after.jsonl", "--force", "--memory", source)
                changed = (workdir / "after.jsonl").read_text().splitlines()[1:]
                tally.other += before[0] == 0 and changed != snapshot  # the memory changed
                tally.other += path.exists() and target == "a new memory"
                tally.other += cli("check", "--memory", source)[0] != 0
    return tally


# -- 9. input that used to escape as a traceback ------------------------------------------------

def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def one_line_errors(workdir: Path) -> Tally:
    tally = Tally()
    with fake_backed_cli() as cli:
        memory, export = _memory_and_export(cli, workdir)
        deep = {"nested.jsonl": '{"text": "x", "id": ' + _nested(100_000) + "}\n",
                "nested.json": "[" + _nested(100_000) + "]",
                "restore.jsonl": export.read_text().splitlines()[0] + "\n" + _nested(100_000)}
        for name, text in deep.items():
            (workdir / name).write_text(text)
        runs = [["ingest", workdir / "nested.jsonl"], ["ingest", workdir / "nested.json"],
                ["restore", workdir / "restore.jsonl"], ["ls", "--offset", str(2**66)],
                ["forget", str(2**66), "--number"], ["ingest", workdir / "nested.jsonl",
                                                     "--batch-size", str(2**66)],
                ["backup", workdir / "missing" / "x.jsonl"],
                ["backup", workdir / "a-folder", "--force"]]
        (workdir / "a-folder").mkdir()
        for args in runs:
            with tally.run(" ".join(map(str, args[:2]))):
                _count(tally, *cli(*args, "--memory", memory))
        with tally.run("forget(id=2**70), the MCP tool's path"), _FakeBacked.open(memory) as m:
            m.forget(2**70)
    with tally.run("a 50 MB line"):
        line = workdir / "long.jsonl"
        line.write_text('{"text": "' + "vegan tofu " * 5_000_000 + '"}\n')
        tracemalloc.start()
        try:
            for _ in read_items(line):
                break
        finally:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            tally.other += peak > 100 * 2**20  # read whole into memory
            tally.notes.append(f"a 50 MB line: peak {peak / 2**20:.0f} MiB traced")
    return tally


CLI_CASES: dict[str, Callable[[Path], Tally]] = {
    "backup --force onto an existing file (0644, 0666, a symlink, new)": backups,
    "other applications' files (SQLite, text) and missing paths, 8 writing commands":
        foreign_files,
    "restore of bad values (NaN/zero/wrong-dim vectors, confidences, times, ids, a bad line)":
        restores,
    "deep JSON, huge integers, a missing folder, a 50 MB line": one_line_errors,
}
