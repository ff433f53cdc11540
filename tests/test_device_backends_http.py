"""LlamaServerVerifier against a real llama_cpp.server on 127.0.0.1 and the in-process verifier."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from epic_edge.errors import InvalidInputError
from epic_edge.types import Preference

pytest.importorskip("llama_cpp")
pytest.importorskip("jinja2")

PREFS = [Preference(1, "I follow a strict vegan diet."), Preference(2, "I love Japanese RPGs.")]
ITEMS = [
    "The steakhouse on Fifth Street serves dry-aged ribeye and bone marrow butter.",
    "A new plant-based restaurant in Lisbon serves tofu, tempeh and seasonal vegetables.",
    "Final Fantasy VII Rebirth is a role-playing game developed by Square Enix.",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def gguf(reference_models):
    return next(reference_models.glob("*.gguf"))


@pytest.fixture(scope="module")
def server(gguf, tmp_path_factory):
    pytest.importorskip("uvicorn")
    pytest.importorskip("sse_starlette")
    port = _free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", "2048", "--n_threads", "2", "--verbose", "False"]
    with log.open("w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT,
                                env={**os.environ, "HF_HUB_OFFLINE": "1"})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited: {log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(url + "/v1/models", timeout=2) as r:
                    json.loads(r.read())
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("llama_cpp.server did not come up in 90 s")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_same_verdicts_as_in_process(server, gguf) -> None:
    from epic_edge.backends import verifier_prompts as vp
    from epic_edge.backends.http_verifier import LlamaServerVerifier
    from epic_edge.backends.llama_cpp_verifier import LlamaCppVerifier

    # One instruction of at most 24 tokens per kept item keeps this under a minute on 2 cores.
    short = {"max_instruction_tokens": 24, "max_preferences_per_item": 1}
    remote = LlamaServerVerifier(server, model_path=gguf, timeout_s=60, **short)
    assert remote.health()
    same = total = 0
    with LlamaCppVerifier(gguf, n_ctx=2048, threads=2, **short) as local:
        for item in ITEMS:
            a, b = local.verify(item, PREFS), remote.verify(item, PREFS)
            # P(Keep) from the server's top-100 log-probabilities vs. the full logits row.
            assert a.keep == b.keep, (item, a.reason, b.reason)
            assert abs(a.confidence - b.confidence) < 0.02, (item, a.reason, b.reason)
            assert a.preference_ids == b.preference_ids
            assert a.instructions.keys() == b.instructions.keys()
            for pid, text in b.instructions.items():
                assert text.startswith(vp.INSTRUCTION_PREFILL) and "template" not in b.reason
                same += text == a.instructions[pid]
                total += 1
    # Greedy decoding over logits computed in different batch layouts (the server keeps
    # logits for every position) may flip a near-tie token; the decisions above may not.
    print(f"instructions identical: {same}/{total}")
    assert total == 0 or same >= 1


def test_server_down_is_a_clear_error_after_bounded_retries() -> None:
    from epic_edge.backends.http_verifier import LlamaServerVerifier, ServerUnavailableError

    port = _free_port()  # nothing listens there
    verifier = LlamaServerVerifier(f"http://127.0.0.1:{port}", timeout_s=1, retries=2,
                                   backoff_s=0.05, chat_template="x")
    assert not verifier.health()
    start = time.monotonic()
    with pytest.raises(ServerUnavailableError, match=r"not answering .* after 3 tries"):
        verifier.verify("some passage", PREFS)
    assert time.monotonic() - start < 30  # bounded, not a hang


def test_only_loopback_urls() -> None:
    from epic_edge.backends.http_verifier import LlamaServerVerifier

    for url in ("http://192.168.1.5:8080", "http://example.com", "ftp://127.0.0.1", "nonsense"):
        with pytest.raises(InvalidInputError):
            LlamaServerVerifier(url)
    LlamaServerVerifier("http://localhost:8080")
    LlamaServerVerifier("http://[::1]:8080")


def test_registry_builds_it(gguf) -> None:
    from epic_edge import registry

    v = registry.create("verifier", {"backend": "llama-server", "url": "http://127.0.0.1:9",
                                     "model": gguf.name, "retries": 0}, gguf.parent)
    assert v.url == "http://127.0.0.1:9" and v._template and "im_start" in v._template
