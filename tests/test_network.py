"""No telemetry: demo, ingest and a query-only process open no non-loopback socket, ask no DNS.

Each runs as a child process watched by strace (native code, e.g. ONNX Runtime's telemetry)
and a Python audit hook (tests/network_watch.py). Without strace only the hook watches, and
the test ends as a skip that says so after its assertions passed.
"""

from __future__ import annotations

import json

import pytest
from network_watch import Observation, epic_edge_command, python_command, watch
from test_cli import PROFILE

from epic_edge.cli import main

QUERY_SECONDS = 20  # ONNX Runtime's telemetry lookups came ~9 s after import
STREAM_SECONDS = 12


def app_loop(seconds: int, step: str) -> str:
    """A Python app that opens the memory argv[1] (profile argv[2], models argv[3]) and runs
    `step` (n counts the rounds) every half second for `seconds`: mostly waiting, as apps do,
    so the shared CPU stays free while the process lives long enough."""
    return f"""
import sys, time
from epic_edge.memory import Memory
memory = Memory.open(sys.argv[1], sys.argv[2], model_dir=sys.argv[3])
end, n = time.monotonic() + {seconds}, 0
while time.monotonic() < end:
    {step}
    n += 1
    time.sleep(0.5)
memory.close()
print("rounds", n)
"""


QUERY_LOOP = app_loop(QUERY_SECONDS, 'memory.retrieve("What should I cook for dinner?")')
STREAM_LOOP = app_loop(STREAM_SECONDS, 'memory.ingest([f"Vegan dish {n}: tofu and tempeh."])')


def _assert_quiet(seen: Observation, *, strace_needed: bool = True) -> None:
    assert seen.returncode == 0, seen.output[-2000:]
    assert seen.findings == [], f"network use: {seen.findings[:5]}"
    if strace_needed and not seen.strace:
        pytest.skip("strace is not installed: only the Python audit hook watched (it cannot "
                    "see native code such as ONNX Runtime); apt-get install strace")


@pytest.fixture(scope="module")
def setting(tmp_path_factory, reference_models):
    tmp = tmp_path_factory.mktemp("net")
    profile = tmp / "test-cpu.toml"
    profile.write_text(PROFILE)
    common = ["--profile", str(profile), "--models", str(reference_models)]
    return tmp, profile, common


ITEMS = ["Tofu and tempeh are plant proteins used in vegan cooking.",
         "The Alps offer long hiking trails between mountain huts."]


def _items_file(tmp):
    items = tmp / "items.jsonl"
    items.write_text("\n".join(json.dumps({"text": t}) for t in ITEMS), encoding="utf-8")
    return items


def test_the_watch_sees_a_dns_query_and_an_outside_socket(tmp_path):
    code = ("import socket\n"
            "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "try: s.sendto(b'x', ('192.0.2.1', 53))\n"
            "except OSError: pass\n"
            "try: socket.getaddrinfo('telemetry.example', 443)\n"
            "except OSError: pass\n")
    seen = watch(python_command(code), tmp_path)
    assert any("192.0.2.1" in f for f in seen.findings)
    assert any("telemetry.example" in e for e in seen.findings)
    if seen.strace:
        assert any("htons(53)" in s for s in seen.syscalls)
    quiet = watch(python_command("import socket; socket.getaddrinfo('127.0.0.1', 80)"), tmp_path)
    assert quiet.findings == []


def test_ingest_opens_no_outside_socket(setting):
    tmp, profile, common = setting
    path = tmp / "ingest.epic"
    common = ["--memory", str(path), *common]
    added = watch(epic_edge_command("prefs", "add", "I follow a strict vegan diet", *common), tmp)
    assert added.returncode == 0, added.output[-2000:]
    assert added.findings == []
    seen = watch(epic_edge_command("ingest", str(_items_file(tmp)), "--quiet", *common), tmp)
    assert "seen 2" in seen.output
    _assert_quiet(seen, strace_needed=False)
    # an app ingesting as items arrive lives long enough for a delayed lookup to show
    stream = watch(python_command(STREAM_LOOP) + [str(path), str(profile), common[-1]], tmp)
    assert "rounds" in stream.output
    _assert_quiet(stream)


def test_a_query_only_process_opens_no_outside_socket(setting):
    tmp, profile, common = setting
    path = tmp / "query.epic"
    assert main(["prefs", "add", "I follow a strict vegan diet", "--memory", str(path),
                 *common]) == 0
    assert main(["ingest", str(_items_file(tmp)), "--quiet", "--memory", str(path), *common]) == 0
    seen = watch(python_command(QUERY_LOOP) + [str(path), str(profile), common[-1]], tmp)
    assert "rounds" in seen.output
    _assert_quiet(seen)


def test_demo_opens_no_outside_socket(setting):
    tmp, profile, common = setting
    seen = watch(epic_edge_command("demo", "--limit", "12", "--questions", "1",
                                   "--profile", str(profile), "--models", common[-1]), tmp)
    assert "store-everything" in seen.output
    _assert_quiet(seen)


def test_a_ray_build_opens_no_outside_socket(setting, monkeypatch):
    """A local Ray cluster (`build --engine ray`) stays on loopback: no usage stats, no cloud
    metadata probe (169.254.169.254), no route lookup towards 8.8.8.8 for the node address."""
    pytest.importorskip("ray", reason="the `ray` extra is not installed")
    tmp, profile, common = setting
    monkeypatch.setenv("EPIC_EDGE_DATA", str(tmp / "ray-data"))
    seen = watch(epic_edge_command("build", "--engine", "ray", "--workers", "1", "--limit", "40",
                                   "--personas", "0", "--verifier", "template",
                                   "--out", str(tmp / "ray-out"), *common), tmp)
    assert "persona" in seen.output
    _assert_quiet(seen)
