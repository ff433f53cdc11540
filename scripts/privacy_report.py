"""RELIABILITY.md's privacy sections: what an encrypted file shows, and network use.

    .venv/bin/python scripts/privacy_report.py     # prints both sections

scripts/reliability_report.py includes them. Privacy at rest runs tests/test_privacy_at_rest.py
and scans keyed and unkeyed files for their vectors, ids and text; network runs demo, ingest
and a 20-second query process under tests/network_watch.py (strace + a Python audit hook).
"""

from __future__ import annotations

import stat
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import pytest  # noqa: E402
from crash_harness import PREFERENCES, batch_items  # noqa: E402


class _Outcomes:
    """A pytest plugin that counts test cases by outcome."""

    def __init__(self) -> None:
        self.passed = self.failed = self.skipped = 0

    def pytest_runtest_logreport(self, report) -> None:  # type: ignore[no-untyped-def]
        if report.when == "call" or report.outcome != "passed":
            setattr(self, report.outcome, getattr(self, report.outcome) + 1)


def _run_tests(path: Path) -> _Outcomes:
    outcomes = _Outcomes()
    pytest.main(["-q", "-p", "no:cacheprovider", str(path)], plugins=[outcomes])
    return outcomes


def _scan(folder: Path, key: bytes | None, fmt: str
          ) -> tuple[dict[str, tuple[int, int]], list[int]]:
    """Build a memory from the crash harness's batches; count what its bytes show in clear
    (each vector encoded exactly as the file would hold it unsealed) and the modes of what
    it created, read while it is open."""
    from test_privacy_at_rest import _open, _raw

    from epic_edge.vectors import encode

    path = folder / "m.epic"
    with _open(path, key, fmt) as memory:
        memory.add_preferences(PREFERENCES)
        items = [{"text": text, "id": f"record-{n:02d}-{i:03d}"}
                 for n in range(6) for i, text in enumerate(batch_items(n))]
        memory.ingest(items)
        prefs = memory.embedder.embed(PREFERENCES)
        ids = [r[0] for r in memory.store.query("SELECT id FROM entries")]
        # each entry's vector as ingest computed it (linux-cpu indexes the item's own)
        entries = memory.embedder.embed([e[3] for e in memory.store.entries_by_id(ids).values()])
        stored_items = memory.store.count("items")
        modes = [stat.S_IMODE(p.stat().st_mode) for p in (folder, *folder.iterdir())]
    raw = _raw(path)
    return {
        "preference vectors": (sum(encode(v) in raw for v in prefs), len(prefs)),
        "entry vectors": (sum(encode(v, fmt) in raw for v in entries), len(entries)),
        "item ids": (sum(i["id"].encode() in raw for i in items), stored_items),
        "preference texts": (sum(p.encode() in raw for p in PREFERENCES), len(PREFERENCES)),
    }, modes


def privacy_at_rest() -> list[str]:
    from epic_edge.crypto import Sealer

    start = time.time()
    outcomes = _run_tests(ROOT / "tests" / "test_privacy_at_rest.py")
    lines = [f"- cases (tests/test_privacy_at_rest.py: sealed vectors and ids in float32 and "
             f"int8, a schema-2 file sealed on open, owner-only modes, keys from the environment "
             f"and key files, 4 read-only commands on a foreign and on a missing file): "
             f"**{outcomes.passed} passed**, {outcomes.failed} failed, {outcomes.skipped} skipped",
             "", "| file | format | preference vectors | entry vectors | item ids | "
             "preference texts |", "|---|---|---|---|---|---|"]
    modes: dict[str, int] = {}
    for label, key in (("with a key", Sealer.new_key()), ("no key (control)", None)):
        for fmt in ("float32", "int8"):
            with tempfile.TemporaryDirectory() as tmp:
                found, created = _scan(Path(tmp) / "new", key, fmt)
            for mode in created:
                modes[f"{mode:o}"] = modes.get(f"{mode:o}", 0) + 1
            cells = " | ".join(f"{n} of {total} in clear" for n, total in found.values())
            lines.append(f"| {label} | {fmt} | {cells} |")
    lines += ["", f"- modes of the files and folders those four memories created (file, -wal, "
              f"-shm, folder): {', '.join(f'{n} x {m}' for m, n in sorted(modes.items()))} "
              f"({time.time() - start:.0f} s in all)"]
    return lines


def network(models: Path | None = None) -> list[str]:
    from network_watch import epic_edge_command, python_command, strace_available, watch
    from test_cli import PROFILE
    from test_network import ITEMS, QUERY_LOOP, STREAM_LOOP

    from epic_edge.export.minilm_onnx import FOLDER
    from epic_edge.models import model_dir

    models = str(models or model_dir())
    onnx = Path(models) / FOLDER / "model.onnx"
    rows = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        profile = tmp / "test-cpu.toml"
        profile.write_text(PROFILE)
        (tmp / "items.txt").write_text("\n".join(ITEMS))
        common = ["--memory", str(tmp / "m.epic"), "--profile", str(profile), "--models", models]
        app = [str(tmp / "m.epic"), str(profile), models]
        runs = [
            ("control: a UDP packet to 192.0.2.1:53, a TCP connect to 192.0.2.1:443",
             python_command(CONTROL)),
            ("control: ONNX Runtime without epic_edge (its default), 12 s", python_command(
                "import time, onnxruntime as ort\n"
                f"ort.InferenceSession({str(onnx)!r}, providers=['CPUExecutionProvider'])\n"
                "time.sleep(12)")),
            ("`epic-edge demo --limit 12 --questions 1`", epic_edge_command(
                "demo", "--limit", "12", "--questions", "1", "--profile", str(profile),
                "--models", models)),
            ("`epic-edge prefs add`", epic_edge_command("prefs", "add", "I eat vegan", *common)),
            ("`epic-edge ingest`", epic_edge_command("ingest", str(tmp / "items.txt"), "--quiet",
                                                     *common)),
            ("streaming ingest process, 12 s", python_command(STREAM_LOOP) + app),
            ("query-only process, 20 s", python_command(QUERY_LOOP) + app),
        ]
        for label, argv in runs:
            start = time.time()
            seen = watch(argv, tmp)
            rows.append(f"| {label} | {seen.returncode} | {time.time() - start:.0f} s | "
                        f"{len(seen.syscalls)} / {len(seen.python_events)} | "
                        f"{_kinds(seen.syscall_findings)} | {_kinds(seen.python_findings)} |")
    how = ("strace -f (connect, sendto, sendmsg, sendmmsg) and a Python audit hook"
           if strace_available() else "a Python audit hook only (strace is not installed)")
    return [f"Watched with {how}; a finding is a socket to a non-loopback address or any DNS "
            "query (port 53, even on loopback, or the systemd resolver). The controls show "
            "that the watch sees both kinds.", "",
            "| process | exit | time | socket calls seen (strace / hook) | findings by strace | "
            "findings by the hook |", "|---|---|---|---|---|---|", *rows]


CONTROL = """import socket
udp, tcp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM), socket.create_connection
for send in (lambda: udp.sendto(b"x", ("192.0.2.1", 53)),
             lambda: tcp(("192.0.2.1", 443), timeout=0.2)):
    try:
        send()
    except OSError:
        pass
"""


def _kinds(findings: list[str]) -> str:
    from network_watch import is_dns

    dns = sum(map(is_dns, findings))
    return f"{dns} DNS, {len(findings) - dns} other"


if __name__ == "__main__":
    print("## Privacy at rest\n\n" + "\n".join(privacy_at_rest()))
    print("\n## Network\n\n" + "\n".join(network()))
