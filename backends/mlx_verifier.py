"""Verifier on mlx-lm (Metal GPU on a Mac; CPU elsewhere via mlx[cpu]), llama.cpp prompts."""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from epic_edge.decision import decide, guard, keep_levels
from epic_edge.errors import ModelNotFoundError
from epic_edge.optional import optional_import
from epic_edge.types import Preference, Verdict

from . import verifier_prompts as vp

_HINT = "run `epic-edge export --device macbook-m4 --out DIR` and use DIR as the model folder"


def _import_mlx() -> tuple[Any, Any]:
    return (optional_import("mlx.core", "apple", "the MLX verifier"),
            optional_import("mlx_lm", "apple", "the MLX verifier"))


class MlxVerifier:
    """P(Keep) from the next-token logits of the decision prompt; greedy one-sentence instructions
    (mlx-lm has no grammar sampler: the sentence is cut at its first . ! or ? and checked)."""

    def __init__(self, model_path: str | Path, *, threshold: float = 0.5,
                 floor: float | None = None,
                 max_instruction_tokens: int = 48, max_preferences_per_item: int = 2,
                 max_item_tokens: int = 1024) -> None:
        self.model_path = Path(model_path)
        if not (self.model_path / "config.json").is_file():
            raise ModelNotFoundError(f"MLX model folder {self.model_path} not found; {_HINT}")
        self._mx, mlx_lm = _import_mlx()
        self._generate = mlx_lm.generate
        self._model, self._tok = mlx_lm.load(str(self.model_path))
        self.threshold, self.floor = keep_levels(threshold, floor)
        self.max_instruction_tokens = int(max_instruction_tokens)
        self.max_preferences_per_item = max(1, int(max_preferences_per_item))
        self.max_item_tokens = int(max_item_tokens)
        self._lock = threading.Lock()
        if not getattr(self._tok, "chat_template", None):
            self._tok.chat_template = vp.CHATML
        keep = {self._first(w) for w in vp.KEEP_WORDS}
        discard = {self._first(w) for w in vp.DISCARD_WORDS}
        self._keep, self._discard = sorted(keep - discard), sorted(discard - keep)

    def _first(self, word: str) -> int:
        return int(self._tok.encode(word, add_special_tokens=False)[0])

    def _prompt(self, messages: list[dict[str, str]], prefill: str = "") -> list[int]:
        text = self._tok.apply_chat_template(messages, add_generation_prompt=True,
                                             tokenize=False)
        return list(self._tok.encode(text + prefill, add_special_tokens=False))

    def p_keep(self, item: str, candidates: Sequence[Preference]) -> float:
        mx = self._mx
        tokens = self._prompt(vp.decision_messages(item, list(candidates)))
        logits = self._model(mx.array([tokens]))[0, -1].astype(mx.float32)
        lk = float(mx.logsumexp(logits[mx.array(self._keep)]))
        ld = float(mx.logsumexp(logits[mx.array(self._discard)]))
        return 1.0 / (1.0 + math.exp(min(700.0, ld - lk)))

    def _truncate(self, item: str) -> str:
        ids = self._tok.encode(item, add_special_tokens=False)
        return item if len(ids) <= self.max_item_tokens else self._tok.decode(
            ids[: self.max_item_tokens])

    def verify(self, item: str, candidates: Sequence[Preference]) -> Verdict:
        guarded = guard(item, candidates)
        if guarded is not None:
            return guarded
        with self._lock:
            item, candidates = self._truncate(item), list(candidates)
            p = self.p_keep(item, candidates)
            return decide(item, candidates, [p] * len(candidates), threshold=self.threshold,
                          floor=self.floor,
                          max_preferences=self.max_preferences_per_item,
                          write=self._instructions, llm_calls=1)

    def _instructions(self, item: str, candidates: list[Preference], kept: list[Preference]
                      ) -> tuple[dict[int, str], list[str], int]:
        """One checked instruction per kept preference (template where the check fails)."""

        def generate(pref: Preference) -> str:
            prompt = self._prompt(vp.instruction_messages(item, candidates, pref),
                                  vp.INSTRUCTION_PREFILL)
            raw = self._generate(self._model, self._tok, prompt=prompt,
                                 max_tokens=self.max_instruction_tokens)
            return re.split(r"(?<=[.!?])\s|\n", raw.strip(), maxsplit=1)[0]

        return vp.checked_instructions(item, kept, generate, self.max_instruction_tokens * 8)

    def close(self) -> None:
        self._model = None

    @classmethod
    def from_config(cls, config: dict[str, Any], model_dir: Path) -> MlxVerifier:
        model = Path(str(config.get("model", "smollm2-135m-instruct-mlx-q4"))).expanduser()
        path = model if model.is_absolute() else Path(model_dir) / model
        keys = ("threshold", "floor", "max_instruction_tokens", "max_preferences_per_item",
                "max_item_tokens")
        return cls(path, **{k: config[k] for k in keys if k in config})
