"""Faults during verification and concurrent edits, counted (used by tests and reports)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from crash_harness import PREFERENCES, TESTS, WRITER, batch_items, open_fake_memory

# -- faults during verification ------------------------------------------------------------------


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RaisingVerifier:
    """A verifier with a bug: every `every`-th call raises (every call when every=1)."""

    def __init__(self, every: int = 1) -> None:
        from fakes import KeywordVerifier

        self.every, self.calls, self.inner = every, 0, KeywordVerifier()

    def verify(self, item, candidates):  # type: ignore[no-untyped-def]
        self.calls += 1
        if self.calls % self.every == 0:
            raise RuntimeError("verifier bug")
        return self.inner.verify(item, candidates)


def _closed_port_verifier():  # type: ignore[no-untyped-def]
    from epic_edge.backends.http_verifier import LlamaServerVerifier

    return LlamaServerVerifier(f"http://127.0.0.1:{closed_port()}", retries=0,
                               chat_template="{{ messages }}")


# first-token log-probabilities a llama.cpp server answers with, for each way an answer lies
LYING_ANSWERS = {
    "nan": {"Keep": float("nan"), "Discard": float("nan")},
    "empty": {},
    "no-decision-word": {"ramen": -0.2, "wool": -1.9, "video": -2.5},
}


class _LyingServer(BaseHTTPRequestHandler):
    """A llama.cpp server on loopback that tokenizes as asked but answers every completion
    with the log-probabilities LYING_ANSWERS names for the URL's first path segment."""

    vocabulary: list[str] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        mode, _, endpoint = self.path.strip("/").partition("/")
        if endpoint in ("tokenize", "extras/tokenize"):
            text = body.get("content", body.get("input", ""))
            if text and text not in self.vocabulary:
                self.vocabulary.append(text)
            answer = {"tokens": [self.vocabulary.index(text)] if text else []}
        elif endpoint in ("detokenize", "extras/detokenize"):
            answer = {"content": "".join(self.vocabulary[t] for t in body.get("tokens", []))}
        else:
            answer = {"choices": [{"text": "Keep",
                                   "logprobs": {"top_logprobs": [LYING_ANSWERS[mode]]}}]}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@cache
def lying_server() -> str:
    """The URL of one _LyingServer for this process (a daemon thread)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _LyingServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


def lying_verifier(mode: str):  # type: ignore[no-untyped-def]
    from epic_edge.backends.http_verifier import LlamaServerVerifier

    return LlamaServerVerifier(f"{lying_server()}/{mode}", retries=0,
                               chat_template="{{ messages }}")


def _missing_model():  # type: ignore[no-untyped-def]
    from epic_edge import registry

    return registry.create("verifier", {"backend": "learned", "model": "absent/model.onnx"},
                           Path("/nonexistent"))


def _missing_extra():  # type: ignore[no-untyped-def]
    from epic_edge.registry import resolve

    return resolve("epic_edge_absent_backend:Verifier", "absent")()


# fault -> factory of the broken verifier (built lazily, as Memory.open builds a profile's)
FAULTS: dict[str, Callable[[], object]] = {
    "verifier raises on every item": lambda: RaisingVerifier(),
    "verifier raises on every 3rd item": lambda: RaisingVerifier(every=3),
    "HTTP verifier at a closed loopback port": _closed_port_verifier,
    "profile names a missing model": _missing_model,
    "backend's extra not installed": _missing_extra,
    "HTTP verifier answering NaN log-probabilities": lambda: lying_verifier("nan"),
    "HTTP verifier answering an empty top_logprobs": lambda: lying_verifier("empty"),
    "HTTP verifier answering no Keep or Discard word": lambda: lying_verifier("no-decision-word"),
}
# faults whose verifier answers without ever giving a probability: none of its verdicts counts
ANSWERS_WITHOUT_A_PROBABILITY = {name for name in FAULTS if name.startswith("HTTP verifier ans")}


@dataclass
class FaultStats:
    runs: int = 0
    failed_items: int = 0  # verifications that failed (or could not start)
    recorded_as_judged: int = 0  # failed items found in the judged ledger: must be 0
    lost: int = 0  # items the control kept that are missing after the fault is fixed
    kept_without_verdict: int = 0  # items kept that the control discarded: must be 0
    per_fault: dict[str, int] = field(default_factory=dict)


def run_verification_faults(workdir: Path, rounds: int = 1,
                            only: set[str] | None = None) -> FaultStats:
    """For each fault (or those `only` names): ingest a batch with the broken verifier, then
    again with a working one; compare with a control memory that never saw the fault
    (consolidation off, so the kept items are exactly the verifier's decisions)."""
    stats = FaultStats()
    for n in range(rounds):
        items = batch_items(100 + n)
        control = _fresh(workdir / f"control{n}.epic")
        to_verify = sum(s.passed_filter for s in control.ingest(items))
        expected = _texts(control)
        control.close()
        for k, (name, factory) in enumerate(FAULTS.items()):
            if only is not None and name not in only:
                continue
            memory = _fresh(workdir / f"fault{n}-{k}.epic")
            memory._verifier = factory  # built on first use, inside the ingest
            try:
                batches = memory.ingest(items)
                failed, verified = sum(s.failed for s in batches), sum(s.verified for s in batches)
            except Exception:  # a verifier that cannot be built stops the ingest
                failed, verified = to_verify, 0
            if name in ANSWERS_WITHOUT_A_PROBABILITY:  # what it "verified" had no verdict
                failed, verified = failed + verified, 0
            stats.recorded_as_judged += memory.store.count("judged") - verified
            memory.close()
            memory = _fresh(workdir / f"fault{n}-{k}.epic")  # the fault is fixed
            memory.ingest(items)
            stats.lost += len(expected - _texts(memory))
            stats.kept_without_verdict += len(_texts(memory) - expected)
            memory.close()
            stats.runs += 1
            stats.failed_items += failed
            stats.per_fault[name] = stats.per_fault.get(name, 0) + failed
    return stats


def _fresh(path: Path):  # type: ignore[no-untyped-def]
    memory = open_fake_memory(str(path))
    memory.settings = memory.settings.replace(consolidate_threshold=None)
    memory.add_preferences(PREFERENCES)
    return memory


def _texts(memory) -> set[str]:  # type: ignore[no-untyped-def]
    return {memory.store.sealer.open(r[0]) for r in memory.store.query("SELECT text FROM items")}


# -- concurrent edits: preferences change while other processes ingest ---------------------------

EDITOR = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from crash_harness import open_fake_memory
memory = open_fake_memory(sys.argv[1])
for n in range(int(sys.argv[2])):
    memory.add_preference(f"shared vegan tofu preference {{n}}")  # both editors add it
    memory.add_preference(f"{{sys.argv[3]}} vegan plant cooking {{n}}")
    memory.remove_preference(f"{{sys.argv[3]}} vegan plant cooking {{n}}")
print("edits", 3 * int(sys.argv[2]))
"""


@dataclass
class EditStats:
    runs: int = 0
    edits: int = 0  # preference additions and removals
    batches: int = 0  # ingest batches committed meanwhile
    failed_processes: int = 0
    corrupt_alarms: int = 0  # "corrupt" in any message: must be 0
    files_failing_check: int = 0
    errors: list[str] = field(default_factory=list)


def run_concurrent_edits(workdir: Path, runs: int = 1, rounds: int = 15) -> EditStats:
    """Each run: two writers ingest 30 batches while two editors add the same preferences and
    add and remove their own, all in separate processes on one file."""
    stats = EditStats()
    for run in range(runs):
        path = workdir / f"edits{run}.epic"
        with open_fake_memory(str(path)) as memory:
            memory.add_preferences(PREFERENCES)
        procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path)], text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for _ in range(2)]
        procs += [subprocess.Popen([sys.executable, "-c", EDITOR, str(path), str(rounds),
                                    f"editor{e}"], text=True, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE) for e in range(2)]
        for proc in procs:
            out, err = proc.communicate(timeout=600)
            stats.batches += out.count("committed ")
            stats.edits += sum(int(line.split()[1]) for line in out.splitlines()
                               if line.startswith("edits "))
            stats.corrupt_alarms += err.count("corrupt")
            if proc.returncode != 0:
                stats.failed_processes += 1
                stats.errors.append(f"run {run}: {err.strip().splitlines()[-1][:300]}")
        with open_fake_memory(str(path)) as memory:
            if not memory.check().ok:
                stats.files_failing_check += 1
        stats.runs += 1
    return stats
