"""Fine verification with a small GGUF LLM through llama.cpp: Keep/Discard logits + instructions."""

from __future__ import annotations

import ctypes
import logging
import math
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.errors import MissingExtraError, ModelNotFoundError
from epic_edge.types import Preference, Verdict

from . import verifier_prompts as vp

log = logging.getLogger(__name__)

# "keep-discard": one Keep/Discard question over all candidates (one call per item);
# "per-preference": one yes/no question per candidate preference (one call per candidate);
# "none": no LLM decision, the coarse filter's candidates are kept and the LLM only writes
# instructions (for models whose decision logits carry no signal: see bench.verification).
DECISIONS = ("keep-discard", "per-preference", "none")
# "chat": the GGUF's chat template (ChatML when it has none); "completion": a plain-text prompt
# for base models (verifier_prompts.completion_prompt); "auto": chat iff the GGUF has a template.
PROMPT_FORMATS = ("auto", "chat", "completion")

_CHARS_PER_TOKEN_CUT = 32  # pre-cut huge items before tokenising; no token is this long
_TOKEN_DATA = np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True)


def _import_llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError as exc:
        raise MissingExtraError(
            f"the llama.cpp verifier needs llama-cpp-python ({exc}); "
            "install it with: pip install 'epic-edge[cpu]'"
        ) from exc
    return llama_cpp


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


class LlamaCppVerifier:
    """Verifier over one llama_cpp.Llama; not thread-safe by itself, so calls are serialised.

    Decision: one forward pass over the chat prompt, P(Keep) from the next-token logits of the
    first sub-tokens of the Keep and Discard words. Instructions: greedy generation under a tiny
    GBNF grammar (one plain sentence), checked, with a template as fallback.
    """

    def __init__(
        self,
        model_path: str | Path,
        n_ctx: int = 2048,
        threads: int = 2,
        max_instruction_tokens: int = 48,
        threshold: float = 0.5,
        max_preferences_per_item: int = 2,
        seed: int = 0,
        decision: str = "keep-discard",
        n_gpu_layers: int = 0,
        prompt_format: str = "auto",
    ) -> None:
        from epic_edge.export.gguf import check_gguf

        llama_cpp = _import_llama_cpp()
        self.model_path = check_gguf(Path(model_path))
        self.threshold = float(threshold)
        if decision not in DECISIONS:
            raise ValueError(f"decision must be one of {DECISIONS}, not {decision!r}")
        self.decision = decision
        if prompt_format not in PROMPT_FORMATS:
            raise ValueError(
                f"prompt_format must be one of {PROMPT_FORMATS}, not {prompt_format!r}")
        self.prompt_format = prompt_format
        self.max_instruction_tokens = int(max_instruction_tokens)
        self.max_preferences_per_item = max(1, int(max_preferences_per_item))
        self._lock = threading.Lock()
        self._llama_cpp = llama_cpp
        n_threads = int(threads) or None  # 0 = let llama.cpp choose
        self.n_gpu_layers = offload_layers(int(n_gpu_layers),
                                           bool(llama_cpp.llama_supports_gpu_offload()))
        try:
            self._llm: Any = llama_cpp.Llama(
                model_path=str(self.model_path), n_ctx=int(n_ctx), n_threads=n_threads,
                n_threads_batch=n_threads, seed=int(seed), logits_all=False, verbose=False,
                n_gpu_layers=self.n_gpu_layers,
            )
        except ValueError as exc:  # llama.cpp refused the file despite a sound header
            raise ModelNotFoundError(f"llama.cpp could not load {self.model_path}: {exc}") from exc
        # llama.cpp may pad the context (to 256) while Llama sizes its token buffer by n_ctx.
        self.n_ctx = min(int(n_ctx), self._llm.n_ctx())
        self._formatter = self._chat_formatter()
        self._keep_ids = self._first_tokens(vp.KEEP_WORDS)
        self._discard_ids = self._first_tokens(vp.DISCARD_WORDS)
        shared = self._keep_ids & self._discard_ids
        self._keep_ids -= shared
        self._discard_ids -= shared
        self._yes_ids = self._first_tokens(vp.YES_WORDS)
        self._no_ids = self._first_tokens(vp.NO_WORDS) - self._yes_ids

    @classmethod
    def from_config(cls, config: dict[str, Any], model_dir: Path) -> LlamaCppVerifier:
        """Build from a device profile's [verifier] section; `model` is relative to model_dir."""
        model = Path(str(config.get("model", "smollm2-135m-instruct-q4_1.gguf"))).expanduser()
        path = model if model.is_absolute() else Path(model_dir) / model
        keys = ("n_ctx", "threads", "max_instruction_tokens", "threshold",
                "max_preferences_per_item", "seed", "decision", "n_gpu_layers",
                "prompt_format")
        return cls(path, **{k: config[k] for k in keys if k in config})

    def close(self) -> None:
        if self._llm is not None:
            self._llm.close()
            self._llm = None

    def __enter__(self) -> LlamaCppVerifier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the Verifier protocol ------------------------------------------------------------------

    def verify(self, item: str, candidates: Sequence[Preference]) -> Verdict:
        if self._llm is None:
            raise RuntimeError("LlamaCppVerifier is closed")
        if not candidates:
            return Verdict.discard(reason="no candidate preferences")
        if not item or not item.strip():
            return Verdict.discard(reason="empty item")
        with self._lock:
            return self._verify(item, list(candidates))

    def _verify(self, item: str, candidates: list[Preference]) -> Verdict:
        calls = 0
        try:
            item = self._truncate(item, candidates)
            if self.decision == "none":
                probs = [1.0] * len(candidates)
            elif self.decision == "per-preference":
                probs = []
                for pref in candidates:
                    calls += 1
                    probs.append(self._p_yes(item, pref))
            else:
                calls = 1
                probs = [self._p_keep(item, candidates)] * len(candidates)
        except Exception as exc:  # never crash, never log the item (it may be personal)
            log.warning("llama.cpp decision failed (%s); item discarded", type(exc).__name__)
            return Verdict.discard(reason=f"decision failed: {type(exc).__name__}",
                                   llm_calls=calls)
        p_keep = max(probs)
        if p_keep < self.threshold:
            return Verdict.discard(
                reason=f"P(Keep)={p_keep:.3f} < threshold {self.threshold:.2f}",
                llm_calls=calls, confidence=1.0 - p_keep,
            )
        ranked = sorted((p for p, q in zip(candidates, probs) if q >= self.threshold),
                        key=lambda p: -probs[candidates.index(p)])
        kept = ranked[: self.max_preferences_per_item]
        instructions, notes, more = self._instructions(item, candidates, kept)
        reason = f"P(Keep)={p_keep:.3f} >= threshold {self.threshold:.2f}"
        if notes:
            reason += "; " + "; ".join(notes)
        return Verdict(keep=True, preference_ids=[p.id for p in kept], instructions=instructions,
                       reason=reason, confidence=p_keep, llm_calls=calls + more)

    def write_instructions(
        self, item: str, candidates: Sequence[Preference], kept: Sequence[Preference]
    ) -> tuple[dict[int, str], list[str], int]:
        """One checked instruction per kept preference (template on failure), for a decision
        made elsewhere (e.g. a learned verifier); returns (instructions, notes, llm_calls)."""
        if self._llm is None:
            raise RuntimeError("LlamaCppVerifier is closed")
        candidates = list(candidates) or list(kept)
        with self._lock:
            try:
                item = self._truncate(item, candidates)
            except Exception as exc:
                note = f"template instructions ({type(exc).__name__})"
                return {p.id: vp.template_instruction(item, p) for p in kept}, [note], 0
            return self._instructions(item, candidates, list(kept))

    def _instructions(
        self, item: str, candidates: list[Preference], kept: list[Preference]
    ) -> tuple[dict[int, str], list[str], int]:
        instructions: dict[int, str] = {}
        notes: list[str] = []
        calls = 0
        for pref in kept:
            calls += 1
            try:
                raw = self._generate(self._prompt_tokens(
                    vp.instruction_messages(vp.ITEM_SLOT, candidates, pref),
                    vp.INSTRUCTION_PREFILL, item=item))
                text, problem = vp.clean_instruction(
                    raw, item, prefix=vp.INSTRUCTION_PREFILL,
                    max_chars=self.max_instruction_tokens * 8)
            except Exception as exc:
                log.warning("llama.cpp instruction failed (%s)", type(exc).__name__)
                text, problem = "", f"generation failed: {type(exc).__name__}"
            if problem:
                text = vp.template_instruction(item, pref)
                notes.append(f"template instruction for preference {pref.id} ({problem})")
            instructions[pref.id] = text
        return instructions, notes, calls

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

    def _p_keep(self, item: str, candidates: list[Preference]) -> float:
        """One forward pass; P(Keep) from the last position's logits (prefix KV reused)."""
        messages = vp.decision_messages(vp.ITEM_SLOT, candidates)
        return self._two_way(self._prompt_tokens(messages, item=item),
                             self._keep_ids, self._discard_ids)

    def _p_yes(self, item: str, preference: Preference) -> float:
        """One forward pass; P(yes) that `item` bears on `preference`."""
        messages = vp.question_messages(vp.ITEM_SLOT, preference)
        return self._two_way(self._prompt_tokens(messages, item=item),
                             self._yes_ids, self._no_ids)

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

    def score(self, item: str, candidates: Sequence[Preference], mode: str = "keep-discard",
              examples: Sequence[tuple[str, str, bool]] = ()) -> list[float]:
        """Decision probabilities without instructions (for calibration and the bench):
        one P(Keep) per candidate ("keep-discard" and "few-shot" give the same value to all)."""
        candidates = list(candidates)
        with self._lock:
            item = self._truncate(item, candidates)
            if mode == "per-preference":
                return [self._p_yes(item, p) for p in candidates]
            if mode == "few-shot":
                tokens = self._prompt_tokens(
                    vp.fewshot_messages(vp.ITEM_SLOT, candidates, examples), item=item)
                return [self._two_way(tokens, self._keep_ids, self._discard_ids)] * len(candidates)
            if mode == "keep-discard":
                return [self._p_keep(item, candidates)] * len(candidates)
        raise ValueError(f"unknown scoring mode {mode!r}")

    def generate_free(self, item: str, candidates: Sequence[Preference], max_tokens: int = 32,
                      ) -> str:
        """Greedy, unconstrained reply to the paper's free-form JSON decision prompt."""
        candidates = list(candidates)
        with self._lock:
            item = self._truncate(item, candidates)
            tokens = self._prompt_tokens(vp.json_messages(vp.ITEM_SLOT, candidates), item=item)
            logits = self._eval_last_logits(tokens)
            vocab = self._llm._model.vocab
            out: list[int] = []
            while len(out) < max_tokens:
                tok = int(np.argmax(logits))
                if self._llama_cpp.llama_vocab_is_eog(vocab, tok):
                    break
                out.append(tok)
                self._llm.eval([tok])
                logits = self._last_logits()
            return self._llm.detokenize(out).decode("utf-8", errors="ignore")

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
