"""Verifier over a llama.cpp server (OpenAI-compatible HTTP) on loopback: the phone's OpenCL build.

The prompts are the in-process verifier's (verifier_prompts), rendered here with the model's
chat template, so both paths judge the same text: P(Keep) from the first-token log-probabilities
of the Keep/Discard words, instructions by greedy decoding under the same GBNF grammar.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import math
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from epic_edge.decision import decide, guard, keep_levels
from epic_edge.errors import EpicEdgeError, InvalidInputError, VerdictError
from epic_edge.optional import optional_import
from epic_edge.types import Preference, Verdict

from . import verifier_prompts as vp

log = logging.getLogger(__name__)
_RETRY_STATUS = {429, 500, 502, 503, 504}  # 503: the server is still loading the model


class ServerUnavailableError(EpicEdgeError):
    """The llama.cpp server did not answer (down, refused, timed out) after the retries."""


def _loopback_only(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInputError(f"server url {url!r} must look like http://127.0.0.1:8080")
    host = parts.hostname
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise InvalidInputError(f"server url {url!r} is not on this device (loopback only): "
                                "items are personal and never leave it")
    return url.rstrip("/")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect could send the item anywhere: it is refused (urllib raises HTTPError 3xx)."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


# no redirects, and no proxy from the environment (http_proxy would carry items off the device)
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())


def _render(template: str, messages: list[dict[str, str]]) -> str:
    ImmutableSandboxedEnvironment = optional_import(
        "jinja2.sandbox", "android", "the server verifier's chat templates"
    ).ImmutableSandboxedEnvironment

    def fail(message: str) -> None:
        raise InvalidInputError(f"chat template refused the prompt: {message}")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(template).render(messages=messages, add_generation_prompt=True,
                                            bos_token="", eos_token="", raise_exception=fail)


class LlamaServerVerifier:
    """Talks to llama-server (C++) or llama_cpp.server (Python) at a loopback URL."""

    def __init__(self, url: str = "http://127.0.0.1:8080", *, chat_template: str | None = None,
                 model_path: str | Path | None = None, timeout_s: float = 30.0,
                 retries: int = 2, backoff_s: float = 0.5, threshold: float = 0.5,
                 floor: float | None = None,
                 max_instruction_tokens: int = 48, max_preferences_per_item: int = 2,
                 top_logprobs: int = 100, max_item_chars: int = 6000) -> None:
        self.url = _loopback_only(url)
        if timeout_s <= 0 or retries < 0 or not 1 <= top_logprobs <= 100:
            raise InvalidInputError("timeout_s > 0, retries >= 0, 1 <= top_logprobs <= 100")
        self.timeout_s, self.retries, self.backoff_s = float(timeout_s), int(retries), backoff_s
        self.threshold, self.floor = keep_levels(threshold, floor)
        self.max_instruction_tokens = int(max_instruction_tokens)
        self.max_preferences_per_item = max(1, int(max_preferences_per_item))
        self.top_logprobs, self.max_item_chars = int(top_logprobs), int(max_item_chars)
        self._template = chat_template or self._local_template(model_path)
        self._words: tuple[set[str], set[str]] | None = None

    @staticmethod
    def _local_template(model_path: str | Path | None) -> str | None:
        if model_path is None or not Path(model_path).is_file():
            return None
        from epic_edge.backends.gguf_file import gguf_metadata

        template = gguf_metadata(Path(model_path)).get("tokenizer.chat_template")
        return template if isinstance(template, str) else None

    # -- HTTP -------------------------------------------------------------------------------------

    def _post(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """JSON request with a timeout and bounded retries (connection errors and 429/5xx)."""
        data = None if body is None else json.dumps(body).encode("utf-8")
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            request = urllib.request.Request(
                self.url + path, data=data, method="GET" if body is None else "POST",
                headers={"Content-Type": "application/json"})
            try:
                with _OPENER.open(request, timeout=self.timeout_s) as response:
                    return json.loads(response.read().decode("utf-8"))
            except urllib.error.HTTPError as exc:
                if exc.code == 404:
                    raise
                if 300 <= exc.code < 400:
                    raise ServerUnavailableError(
                        f"{self.url}{path} answered a redirect (HTTP {exc.code}); redirects are "
                        "refused: items never leave the server the profile names") from exc
                last = f"HTTP {exc.code}"
                if exc.code not in _RETRY_STATUS:
                    raise ServerUnavailableError(f"llama.cpp server at {self.url} answered "
                                                 f"{last} to {path}") from exc
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
                last = str(getattr(exc, "reason", exc)) or type(exc).__name__
            except ValueError as exc:
                raise ServerUnavailableError(f"{self.url}{path} did not answer JSON") from exc
        raise ServerUnavailableError(
            f"llama.cpp server at {self.url} is not answering ({last}) after "
            f"{self.retries + 1} tries of {self.timeout_s:g} s; start it on the device, e.g. "
            "`llama-server -m smollm2-135m-instruct-q4_1.gguf --host 127.0.0.1 --port 8080`")

    def _either(self, first: tuple[str, dict[str, Any]], second: tuple[str, dict[str, Any]]
                ) -> dict[str, Any]:
        """llama-server and llama_cpp.server name some endpoints differently."""
        try:
            return self._post(*first)
        except urllib.error.HTTPError:
            return self._post(*second)

    def health(self) -> bool:
        """True when the server answers /v1/models (one try, no retries)."""
        retries, self.retries = self.retries, 0
        try:
            self._post("/v1/models")
            return True
        except (ServerUnavailableError, urllib.error.HTTPError):
            return False
        finally:
            self.retries = retries

    def _tokenize(self, text: str) -> list[int]:
        answer = self._either(("/tokenize", {"content": text, "add_special": False}),
                              ("/extras/tokenize", {"input": text}))
        tokens = answer.get("tokens")
        if not isinstance(tokens, list):
            raise ServerUnavailableError(f"{self.url} answered /tokenize without a token list")
        return tokens

    def _token_text(self, word: str) -> str:
        """Text of the first token the server's tokenizer makes of `word`."""
        toks, empty = self._tokenize(word), self._tokenize("")
        toks = toks[len(empty):] if toks[: len(empty)] == empty else toks
        out = self._either(("/detokenize", {"tokens": toks[:1]}),
                           ("/extras/detokenize", {"tokens": toks[:1]}))
        return str(out.get("content", out.get("text", "")))

    def _decision_words(self) -> tuple[set[str], set[str]]:
        if self._words is None:
            keep = {self._token_text(w) for w in vp.KEEP_WORDS}
            discard = {self._token_text(w) for w in vp.DISCARD_WORDS}
            self._words = (keep - discard, discard - keep)
        return self._words

    def _template_text(self) -> str:
        if self._template is None:
            try:
                props = self._post("/props")
                self._template = props.get("chat_template") or vp.CHATML
            except (urllib.error.HTTPError, ServerUnavailableError):
                self._template = vp.CHATML
        return self._template

    def _complete(self, prompt: str, **extra: Any) -> dict[str, Any]:
        body = {"prompt": prompt, "temperature": 0.0, "top_k": 1, "repeat_penalty": 1.0,
                "stream": False, **extra}
        choices = self._post("/v1/completions", body).get("choices") or []
        if not choices:
            raise ServerUnavailableError(f"{self.url}/v1/completions returned no choices")
        return choices[0]

    # -- the Verifier protocol --------------------------------------------------------------------

    def p_keep(self, item: str, candidates: Sequence[Preference]) -> float:
        """P(Keep) against P(Discard) from the first generated position's log-probabilities."""
        keep, discard = self._decision_words()
        prompt = _render(self._template_text(), vp.decision_messages(item, list(candidates)))
        choice = self._complete(prompt, max_tokens=1, logprobs=self.top_logprobs)
        top = _top_logprobs(choice.get("logprobs"))
        if not all(math.isfinite(v) for v in top.values()):
            raise VerdictError(f"{self.url} answered log-probabilities that are not numbers")
        seen_keep, seen_discard = ([top[t] for t in side if t in top] for side in (keep, discard))
        if not seen_keep and not seen_discard:  # no answer from the model: no 0.5 either
            raise VerdictError(f"{self.url} answered no Keep or Discard word among its "
                               f"{len(top)} most likely first tokens")
        # Words outside the top list carry little mass and are left out; a side with no word
        # in the list gets the last listed value, an upper bound on its log-probability.
        floor = min(top.values())
        lk, ld = _lse(seen_keep or [floor]), _lse(seen_discard or [floor])
        return 1.0 / (1.0 + math.exp(min(700.0, ld - lk)))

    def verify(self, item: str, candidates: Sequence[Preference]) -> Verdict:
        guarded = guard(item, candidates)
        if guarded is not None:
            return guarded
        item, candidates = item[: self.max_item_chars], list(candidates)
        p = self.p_keep(item, candidates)  # ServerUnavailableError propagates: nothing is judged
        return decide(item, candidates, [p] * len(candidates), threshold=self.threshold,
                      floor=self.floor, max_preferences=self.max_preferences_per_item,
                      write=self._instructions, llm_calls=1)

    def _instructions(self, item: str, candidates: list[Preference], kept: list[Preference]
                      ) -> tuple[dict[int, str], list[str], int]:
        """One checked instruction per kept preference (template where the check fails); a
        server fault propagates (the item is not judged)."""

        def generate(pref: Preference) -> str:
            prompt = _render(self._template_text(), vp.instruction_messages(item, candidates, pref))
            return str(self._complete(prompt + vp.INSTRUCTION_PREFILL,
                                      grammar=vp.INSTRUCTION_GRAMMAR,
                                      max_tokens=self.max_instruction_tokens).get("text", ""))

        return vp.checked_instructions(item, kept, generate, self.max_instruction_tokens * 8)

    def close(self) -> None:
        """Nothing to release: every request opens and closes its own connection."""

    @classmethod
    def from_config(cls, config: dict[str, Any], model_dir: Path) -> LlamaServerVerifier:
        """From a profile's [verifier]: url, timeout_s, retries...; `model` (a local GGUF) gives
        the chat template when present."""
        model = config.get("model")
        keys = ("chat_template", "timeout_s", "retries", "backoff_s", "threshold", "floor",
                "max_instruction_tokens", "max_preferences_per_item", "top_logprobs",
                "max_item_chars")
        return cls(str(config.get("url", "http://127.0.0.1:8080")),
                   model_path=Path(model_dir) / str(model) if model else None,
                   **{k: config[k] for k in keys if k in config})


def _top_logprobs(logprobs: Any) -> dict[str, float]:
    """First position's {token text: logprob}: legacy completions or llama-server's content list."""
    if not logprobs:
        raise ServerUnavailableError("the server returned no logprobs; llama_cpp.server needs "
                                     "logits_all (its default), llama-server needs n_probs")
    if isinstance(logprobs.get("top_logprobs"), list) and logprobs["top_logprobs"]:
        return {str(k): float(v) for k, v in logprobs["top_logprobs"][0].items()}
    content = logprobs.get("content") or []
    if content:
        return {str(e["token"]): float(e["logprob"]) for e in content[0].get("top_logprobs", [])}
    raise ServerUnavailableError("the server's logprobs have an unknown shape")


def _lse(values: list[float]) -> float:
    m = max(values)
    return m + math.log(sum(math.exp(v - m) for v in values))


def runs_here(config: dict[str, Any]) -> tuple[list[str], list[str]]:
    """`devices`: a llama.cpp server must answer at the profile's URL."""
    url = str(config.get("url", "http://127.0.0.1:8080"))
    if not LlamaServerVerifier(url, timeout_s=0.5, retries=0, chat_template="-").health():
        return [f"no llama.cpp server answers at {url} (start llama-server there)"], []
    return [], []
