"""A small OpenAI-compatible chat client (stdlib urllib) for the judged evaluation."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from epic_edge.errors import EpicEdgeError, InvalidInputError


class EndpointError(EpicEdgeError):
    """The chat endpoint could not be reached or answered something unusable."""


@dataclass
class ChatClient:
    """POSTs to `<endpoint>/v1/chat/completions`; `endpoint` may already end in /v1.

    Nothing is logged; item text only travels to the endpoint the user configured.
    """

    endpoint: str
    model: str = "local"
    timeout: float = 120.0
    api_key: str | None = None
    max_tokens: int = 256
    temperature: float = 0.0

    def __post_init__(self) -> None:
        if not self.endpoint.startswith(("http://", "https://")):
            raise InvalidInputError(f"endpoint must be an http(s) URL, got {self.endpoint!r}")
        base = self.endpoint.rstrip("/")
        self.url = base + ("/chat/completions" if base.endswith("/v1") else
                           "/v1/chat/completions")

    def chat(self, messages: Sequence[dict[str, str]], *, max_tokens: int | None = None) -> str:
        """The assistant's reply text for `messages` ([{"role", "content"}, ...])."""
        body = {"model": self.model, "messages": list(messages), "temperature": self.temperature,
                "max_tokens": max_tokens or self.max_tokens}
        reply = self._post(body)
        try:
            return str(reply["choices"][0]["message"]["content"] or "").strip()
        except (KeyError, IndexError, TypeError):
            raise EndpointError(f"{self.url} answered without choices[0].message.content"
                                ) from None

    def ask(self, system: str, user: str, *, max_tokens: int | None = None) -> str:
        return self.chat([{"role": "system", "content": system},
                          {"role": "user", "content": user}], max_tokens=max_tokens)

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, data=json.dumps(body).encode("utf-8"),
                                         headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:200].decode("utf-8", "replace")
            raise EndpointError(f"{self.url} answered HTTP {exc.code}: {detail}") from None
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise EndpointError(f"cannot reach {self.url}: {reason}") from None
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            raise EndpointError(f"{self.url} answered something that is not JSON") from None
