"""The HTTP verifier against a misbehaving local server: hangs, garbage, wrong shapes."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from epic_edge.backends.http_verifier import LlamaServerVerifier, ServerUnavailableError
from epic_edge.backends.numpy_index import NumpyIndex
from epic_edge.memory import Memory
from epic_edge.types import Preference
from fakes import BagOfWordsEmbedder

PREFS = [Preference(1, "I follow a vegan diet")]
BODIES = {
    "/garbage": b"\x00\xffnot json at all",
    "/no-choices": b'{"choices": []}',
    "/no-logprobs": b'{"choices": [{"text": "Keep", "logprobs": null}]}',
}


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        prefix = "/" + self.path.split("/")[1]
        if prefix == "/hang":
            time.sleep(3)  # longer than the client's timeout
        body = BODIES.get(prefix, b"{}")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except BrokenPipeError:
            pass

    do_GET = do_POST

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def bad_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.parametrize("mode", ["hang", "garbage", "no-choices", "no-logprobs"])
def test_misbehaving_server_is_a_clear_bounded_error(bad_server, mode):
    verifier = LlamaServerVerifier(f"{bad_server}/{mode}", timeout_s=0.5, retries=1,
                                   backoff_s=0.01, chat_template="{{ messages }}")
    start = time.monotonic()
    with pytest.raises(ServerUnavailableError):
        verifier.verify("Tofu is a vegan protein.", PREFS)
    assert time.monotonic() - start < 10


def test_ingest_survives_a_hanging_verifier(bad_server, tmp_path):
    verifier = LlamaServerVerifier(f"{bad_server}/hang", timeout_s=0.3, retries=0,
                                   chat_template="{{ messages }}")
    emb = BagOfWordsEmbedder()
    with Memory.open(tmp_path / "m.epic", embedder=emb, verifier=verifier,
                     index=NumpyIndex(emb.dim), tau=0.1) as memory:
        memory.add_preference("vegan tofu diet")
        stats = memory.ingest(["vegan tofu protein", "vegan tofu curry"])
        assert stats[0].failed == 2 and stats[0].kept == 0  # reported, no crash
        assert memory.store.count("judged") == 0  # retried by the next ingest
        assert memory.check().ok


def test_a_redirect_is_refused_and_nothing_reaches_its_target(bad_server):
    hits: list[str] = []

    class Elsewhere(_Handler):  # stands for any host a redirect could name
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            hits.append(self.path)
            super().do_POST()

        do_GET = do_POST

    class Redirects(_Handler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(302)
            self.send_header("Location", f"{target}{self.path}")
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST

    servers = [ThreadingHTTPServer(("127.0.0.1", 0), h) for h in (Elsewhere, Redirects)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    target = f"http://127.0.0.1:{servers[0].server_address[1]}"
    try:
        verifier = LlamaServerVerifier(f"http://127.0.0.1:{servers[1].server_address[1]}",
                                       retries=0, chat_template="{{ messages }}")
        with pytest.raises(ServerUnavailableError, match="redirects are refused"):
            verifier.verify("Tofu is a vegan protein.", PREFS)
        assert hits == []
    finally:
        for server in servers:
            server.shutdown()
