"""Sentence embedder on Core ML (.mlpackage ML program; CPU + Neural Engine); macOS only."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.backends.runtime_support import CoreMLNotSupportedError, require_macos  # noqa: F401
from epic_edge.errors import InvalidInputError, ModelNotFoundError
from epic_edge.models import embedder_files
from epic_edge.optional import optional_import
from epic_edge.protocols import text_list
from epic_edge.registry import COMPUTE_UNITS

_HINT = "run `epic-edge export --device macbook-m4 --out DIR` and use DIR as the model folder"


def encode_batch(tokenizer: Any, texts: list[str], max_length: int) -> dict[str, np.ndarray]:
    """int32 input_ids and attention_mask, padded to the longest text of the batch."""
    encodings = tokenizer.encode_batch(texts)
    width = max(1, max(len(e.ids) for e in encodings))
    ids = np.zeros((len(texts), min(width, max_length)), dtype=np.int32)
    mask = np.zeros_like(ids)
    for row, enc in enumerate(encodings):
        n = min(len(enc.ids), ids.shape[1])
        ids[row, :n] = enc.ids[:n]
        mask[row, :n] = 1
    return {"input_ids": ids, "attention_mask": mask}


class CoreMLEmbedder:
    """Owns one coremltools MLModel; embed() pads per batch of at most `batch_size` texts."""

    def __init__(self, model_path: str | Path, tokenizer_path: str | Path, *,
                 max_length: int = 256, compute_units: str = "CPU_AND_NE",
                 batch_size: int = 16) -> None:
        self.model_path, self.tokenizer_path = Path(model_path), Path(tokenizer_path)
        if not self.model_path.is_dir():
            raise ModelNotFoundError(f"Core ML package {self.model_path} not found; {_HINT}")
        if not self.tokenizer_path.is_file():
            raise ModelNotFoundError(f"tokenizer file {self.tokenizer_path} not found; {_HINT}")
        if compute_units not in COMPUTE_UNITS:
            raise InvalidInputError(f"compute_units {compute_units!r}; one of {COMPUTE_UNITS}")
        require_macos()  # macOS only from here on
        ct = optional_import("coremltools", "apple", "the Core ML embedder")
        tokenizers = optional_import("tokenizers", "apple", "the Core ML embedder")
        meta = json.loads((self.model_path.parent / "model.json").read_text("utf-8"))
        self.meta: dict[str, Any] = meta
        self.dim: int = int(meta.get("dim", 384))
        self.max_length = min(int(max_length), int(meta.get("max_length", max_length)))
        self.batch_size = min(int(batch_size), int(meta.get("max_batch", 64)))
        self._tokenizer = tokenizers.Tokenizer.from_file(str(self.tokenizer_path))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=self.max_length)
        self._model: Any = ct.models.MLModel(
            str(self.model_path), compute_units=getattr(ct.ComputeUnit, compute_units))
        self._output = str(meta.get("output", "sentence_embedding"))

    @property
    def fingerprint(self) -> str:
        # fp16 inference changes the vectors slightly: a memory built by it says so.
        return f"{self.meta.get('name')}:mean:{self.dim}:{self.meta.get('precision', 'fp16')}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = text_list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        rows = []
        for start in range(0, len(texts), self.batch_size):
            feed = encode_batch(self._tokenizer, texts[start:start + self.batch_size],
                                self.max_length)
            rows.append(np.asarray(self._model.predict(feed)[self._output], dtype=np.float32))
        out = np.vstack(rows)
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)

    def close(self) -> None:
        self._model = None

    @classmethod
    def from_config(cls, config: dict[str, Any], model_dir: Path) -> CoreMLEmbedder:
        model, tokenizer = embedder_files(config, model_dir)
        return cls(model, tokenizer, max_length=int(config.get("max_length", 256)),
                   compute_units=str(config.get("compute_units", "CPU_AND_NE")),
                   batch_size=int(config.get("batch_size", 16)))
