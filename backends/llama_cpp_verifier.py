"""Fine verification with a small GGUF LLM through llama.cpp: Keep/Discard logits + instructions."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.decision import decide, guard, keep_levels
from epic_edge.errors import ModelNotFoundError
from epic_edge.registry import DECISIONS, PROMPT_FORMATS
from epic_edge.types import Preference, Verdict

from . import verifier_prompts as vp
from .llama_cpp_runtime import CUDA_BUILD_HINT as CUDA_BUILD_HINT
from .llama_cpp_runtime import LlamaCppCalls, _import_llama_cpp, offload_layers
from .llama_cpp_runtime import gpu_offload_supported as gpu_offload_supported

log = logging.getLogger(__name__)

# "keep-discard": one Keep/Discard question over all candidates (one call per item);
# "per-preference": one yes/no question per candidate preference (one call per candidate);
# "none": no LLM decision, the coarse filter's candidates are kept and the LLM only writes
# instructions (for models whose decision logits carry no signal: see bench.verification).
# (the choices are declared with the backend's row: epic_edge.registry)
# "chat": the GGUF's chat template (ChatML when it has none); "completion": a plain-text prompt
# for base models (verifier_prompts.completion_prompt); "auto": chat iff the GGUF has a template.


class LlamaCppVerifier(LlamaCppCalls):
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
        floor: float | None = None,
        max_preferences_per_item: int = 2,
        seed: int = 0,
        decision: str = "keep-discard",
        n_gpu_layers: int = 0,
        prompt_format: str = "auto",
    ) -> None:
        from epic_edge.backends.gguf_file import check_gguf

        llama_cpp = _import_llama_cpp()
        self.model_path = check_gguf(Path(model_path))
        self.threshold, self.floor = keep_levels(threshold, floor)
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
        keys = ("n_ctx", "threads", "max_instruction_tokens", "threshold", "floor",
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
        guarded = guard(item, candidates)
        if guarded is not None:
            return guarded
        with self._lock:
            return self._verify(item, list(candidates))

    def _verify(self, item: str, candidates: list[Preference]) -> Verdict:
        # a decision fault propagates: epic_edge.faults logs its type (never the item) and
        # the item is not recorded as judged, so the next ingest retries it
        item = self._truncate(item, candidates)
        calls = 0
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
        return decide(item, candidates, probs, threshold=self.threshold, floor=self.floor,
                      max_preferences=self.max_preferences_per_item, write=self._instructions,
                      llm_calls=calls)

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
        def generate(pref: Preference) -> str:
            return self._generate(self._prompt_tokens(
                vp.instruction_messages(vp.ITEM_SLOT, candidates, pref),
                vp.INSTRUCTION_PREFILL, item=item))

        return vp.checked_instructions(item, kept, generate, self.max_instruction_tokens * 8,
                                       fall_back_on_error=True)

    # -- decisions ------------------------------------------------------------------------------

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
