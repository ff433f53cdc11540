"""The judged evaluation end to end against a real llama-cpp-python server on 127.0.0.1."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from epic_edge.errors import InvalidInputError
from epic_edge_lab import judge
from epic_edge_lab.chat_client import ChatClient, EndpointError
from fakes import BagOfWordsEmbedder


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(reference_models, tmp_path_factory):
    for module in ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context",
                   "pydantic_settings"):
        pytest.importorskip(module)
    gguf = next(reference_models.glob("*.gguf"))
    port = _free_port()
    log = open(tmp_path_factory.mktemp("server") / "server.log", "wb")
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", "4096", "--n_threads", "1"],
        stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                urllib.request.urlopen(f"{url}/v1/models", timeout=5).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("llama_cpp.server did not start; see its log")
                time.sleep(1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def test_client_round_trip(server):
    reply = ChatClient(server, timeout=120).ask("You are terse.", "Say hello.", max_tokens=8)
    assert isinstance(reply, str) and reply


def test_client_errors_are_clear():
    with pytest.raises(InvalidInputError):
        ChatClient("localhost:8080")
    with pytest.raises(EndpointError, match="cannot reach"):
        ChatClient(f"http://127.0.0.1:{_free_port()}", timeout=5).ask("s", "u")
    assert ChatClient("http://h:1/v1").url == "http://h:1/v1/chat/completions"


def test_parse_and_classify():
    assert judge.parse_yes_no("The answer is \"Yes.\"") is True
    assert judge.parse_yes_no("No, it does not.") is False
    assert judge.parse_yes_no("nobody knows") is None
    ok = judge.classify({"acknowledges": True, "violates": False, "hallucinates": False,
                         "helpful": True})
    assert ok["correct"] and not any(v for k, v in ok.items() if k != "correct")
    bad = judge.classify({"acknowledges": False, "violates": True, "hallucinates": None,
                          "helpful": True})
    assert bad["unaware_violation"] and not bad["correct"] and not bad["hallucination"]
    unsure = judge.classify({"acknowledges": True, "violates": None, "hallucinates": False,
                             "helpful": True})
    assert unsure["inconsistent"] and not unsure["correct"]  # unparsed counts against


def test_judge_end_to_end(server, tmp_path, monkeypatch):
    monkeypatch.setenv("EPIC_EDGE_DATA", str(tmp_path))
    result = judge.run(server, dataset="prefwiki", corpus="sample", personas="0",
                       systems=("epic",), questions_per_persona=1, tau=0.1, k=1,
                       max_tokens=32, embedder=BagOfWordsEmbedder(), progress=False,
                       log=lambda *a: None)
    (row,) = result["answers"]
    assert row["answer"] and set(row["checks"]) == set(judge.CHECKS)
    assert set(row["judge_replies"]) == set(judge.CHECKS)
    assert row["correct"] == (not any(row[e] for e in ("unhelpful", "inconsistent",
                                                       "unaware_violation", "hallucination")))
    summary = result["systems"]["epic"]
    assert summary["answers"] == 1 and 0.0 <= summary["accuracy"] <= 1.0
    assert "accuracy" in judge.render(result)
