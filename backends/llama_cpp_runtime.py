"""llama.cpp plumbing for the verifier: loading, GPU offload, prompt tokens, cached calls."""

from __future__ import annotations

import ctypes
import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from epic_edge.optional import optional_import
from epic_edge.types import Preference

from . import verifier_prompts as vp

_CHARS_PER_TOKEN_CUT = 32  # pre-cut huge items before tokenising; no token is this long
_TOKEN_DATA = np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True)


def _import_llama_cpp() -> Any:
    return optional_import("llama_cpp", "llama", "the llama.cpp verifier")


CUDA_BUILD_HINT = ('CMAKE_ARGS="-DGGML_CUDA=on" pip install --no-binary llama-cpp-python '
                   "llama-cpp-python==0.3.36")


def gpu_offload_supported() -> bool:
    """True when the installed llama-cpp-python was built with a GPU backend (CUDA, Metal...)."""
    return bool(_import_llama_cpp().llama_supports_gpu_offload())


def offload_layers(requested: int, supported: bool) -> int:
    """Layers to offload: `requested`, or 0 with a warning when this build cannot offload."""
    if requested > 0 and not supported:
        warnings.warn(
            f"n_gpu_layers={requested} asked for, but this llama-cpp-python build has no GPU "
            f"offload: the verifier runs on the CPU. On a Jetson build it with: {CUDA_BUILD_HINT}",
            RuntimeWarning, stacklevel=3)
        return 0
    return max(0, requested)


class LlamaCppCalls:
    """Prompt tokenisation and model calls over one llama_cpp.Llama (`self._llm`).

    Mixed into LlamaCppVerifier, which loads the model and sets the attributes annotated here;
    callers hold the verifier's lock (none of this is thread-safe).
    """

    _llm: Any
    _llama_cpp: Any
    _formatter: Any
    n_ctx: int
    max_instruction_tokens: int
    prompt_format: str

    # -- prompts and tokens ---------------------------------------------------------------------

    def _chat_formatter(self) -> Any:
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        llm = self._llm
        template = llm.metadata.get("tokenizer.chat_template")
        if self.prompt_format == "auto":
            self.prompt_format = "chat" if template else "completion"
        if self.prompt_format == "completion":
            return vp.CompletionFormatter()
        template = template or vp.CHATML
        eos, bos = llm.token_eos(), llm.token_bos()
        return Jinja2ChatFormatter(
            template=template,
            eos_token=llm._model.token_get_text(eos) if eos != -1 else "",
            bos_token=llm._model.token_get_text(bos) if bos != -1 else "",
            add_generation_prompt=True,
        )

    def _prompt_tokens(
        self, messages: list[dict[str, str]], prefill: str = "", item: str = ""
    ) -> list[int]:
        """Tokens of the chat prompt; `item` replaces vp.ITEM_SLOT as plain text, so control
        tokens written inside an item (e.g. "<|im_end|>") stay text and cannot end its turn."""
        prompt = self._formatter(messages=messages).prompt
        if prefill and self.prompt_format == "completion":
            prefill = " " + prefill  # after "Answer:" as a base model would write it
        prompt += prefill
        tokenize = self._llm.tokenize
        item_tokens = tokenize(item.replace(vp.ITEM_SLOT, " ").encode("utf-8"), add_bos=False,
                               special=False) if item else []
        tokens: list[int] = []
        for k, part in enumerate(prompt.split(vp.ITEM_SLOT)):
            if k:
                tokens += item_tokens
            tokens += tokenize(part.encode("utf-8"), add_bos=k == 0, special=True)
        bos = self._llm.token_bos()
        if len(tokens) > 1 and tokens[0] == bos and tokens[1] == bos:
            tokens = tokens[1:]  # the template already wrote a BOS
        return tokens

    def _first_tokens(self, words: Sequence[str]) -> set[int]:
        ids = set()
        for word in words:
            toks = self._llm.tokenize(word.encode("utf-8"), add_bos=False, special=False)
            if toks:
                ids.add(int(toks[0]))
        return ids

    def _truncate(self, item: str, candidates: list[Preference]) -> str:
        """Keep the first tokens of `item` so every prompt plus generation fits in n_ctx."""
        longest = max(candidates, key=lambda p: len(p.text))
        overhead = len(self._prompt_tokens(
            vp.instruction_messages("", candidates, longest), vp.INSTRUCTION_PREFILL))
        budget = self.n_ctx - overhead - self.max_instruction_tokens - 16
        if budget < 16:
            raise ValueError(f"n_ctx={self.n_ctx} is too small for the prompt ({overhead} tokens)")
        item = item[: budget * _CHARS_PER_TOKEN_CUT]
        toks = self._llm.tokenize(item.encode("utf-8"), add_bos=False, special=False)
        if len(toks) <= budget:
            return item
        return self._llm.detokenize(toks[:budget]).decode("utf-8", errors="ignore")

    # -- model calls ----------------------------------------------------------------------------

    def _two_way(self, tokens: list[int], pos: set[int], neg: set[int]) -> float:
        """P(pos) / (P(pos) + P(neg)) over the first sub-tokens of the two answer words."""
        if not pos or not neg:
            raise LookupError("the vocabulary has no distinct answer tokens")
        logits = self._eval_last_logits(tokens)
        keep = logits[sorted(pos)].astype(np.float64)
        discard = logits[sorted(neg)].astype(np.float64)
        if not (np.all(np.isfinite(keep)) and np.all(np.isfinite(discard))):
            raise FloatingPointError("non-finite decision logits")
        lk, ld = _logsumexp(keep), _logsumexp(discard)
        p_keep = 1.0 / (1.0 + math.exp(min(700.0, ld - lk)))
        if not math.isfinite(p_keep):
            raise FloatingPointError("non-finite P(Keep)")
        return p_keep

    def _eval_last_logits(self, tokens: list[int]) -> np.ndarray:
        """Evaluate `tokens`, reusing the cached common prefix; copy of the last logits row."""
        llm = self._llm
        cached = np.asarray(llm.input_ids[: llm.n_tokens])
        new = np.asarray(tokens)
        n = min(len(cached), len(new) - 1)  # evaluate at least one token to get fresh logits
        diff = np.flatnonzero(cached[:n] != new[:n])
        common = int(diff[0]) if diff.size else max(n, 0)
        if common > 0 and llm._ctx.kv_cache_seq_rm(-1, common, -1):
            llm.n_tokens = common
        else:
            llm.reset()
            common = 0
        llm.eval(tokens[common:])
        return self._last_logits()

    def _last_logits(self) -> np.ndarray:
        ptr = self._llama_cpp.llama_get_logits_ith(self._llm._ctx.ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(self._llm.n_vocab(),)).copy()

    def _generate(self, tokens: list[int]) -> str:
        """Greedy continuation of `tokens` under the GBNF grammar, at most max_instruction_tokens.

        The unconstrained argmax is checked against the grammar first, and the grammar is
        applied to the whole vocabulary only when it rejects that token (llama.cpp's own
        sampler does the same): a full pass costs ~25 ms per token on 2 cores with SmolLM2's
        49k vocabulary, which Llama.generate(grammar=...) pays at every token.
        """
        lc, llm = self._llama_cpp, self._llm
        vocab = llm._model.vocab
        smpl = lc.llama_sampler_init_grammar(vocab, vp.INSTRUCTION_GRAMMAR.encode(), b"root")
        if not smpl:
            raise ValueError("the instruction grammar does not parse")
        out: list[int] = []
        try:
            logits = self._eval_last_logits(tokens)
            while len(out) < self.max_instruction_tokens:
                tok = self._grammar_argmax(smpl, logits)
                if tok < 0 or lc.llama_vocab_is_eog(vocab, tok):
                    break
                lc.llama_sampler_accept(smpl, tok)
                out.append(tok)
                llm.eval([tok])
                logits = self._last_logits()
        finally:
            lc.llama_sampler_free(smpl)
        return llm.detokenize(out).decode("utf-8", errors="ignore")

    def _grammar_argmax(self, smpl: Any, logits: np.ndarray) -> int:
        """The highest-logit token the grammar allows next; -1 if it allows none."""
        lc = self._llama_cpp
        tok = int(np.argmax(logits))
        one = (lc.llama_token_data * 1)(lc.llama_token_data(tok, float(logits[tok]), 0.0))
        arr = lc.llama_token_data_array(data=ctypes.cast(one, lc.llama_token_data_p), size=1,
                                        selected=-1, sorted=False)
        lc.llama_sampler_apply(smpl, ctypes.byref(arr))
        if math.isfinite(one[0].logit):
            return tok
        data = np.zeros(len(logits), dtype=_TOKEN_DATA)
        data["id"] = np.arange(len(logits), dtype=np.intc)
        data["logit"] = logits
        arr = lc.llama_token_data_array(data=data.ctypes.data_as(lc.llama_token_data_p),
                                        size=len(logits), selected=-1, sorted=False)
        lc.llama_sampler_apply(smpl, ctypes.byref(arr))
        best = int(np.argmax(data["logit"][: arr.size]))
        return int(data["id"][best]) if np.isfinite(data["logit"][best]) else -1


def _logsumexp(x: np.ndarray) -> float:
    m = float(np.max(x))
    return m + math.log(float(np.sum(np.exp(x - m))))


def runs_here(config: dict[str, Any]) -> tuple[list[str], list[str]]:
    """`devices`: GPU layers asked for where llama-cpp-python has no offload run on the CPU."""
    if int(config.get("n_gpu_layers", 0)) and not gpu_offload_supported():
        return [], ["llama-cpp-python here has no GPU offload: verifier on the CPU"]
    return [], []
