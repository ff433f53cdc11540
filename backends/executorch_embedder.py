"""Sentence embedder on the ExecuTorch runtime (.pte with XNNPACK or QNN delegate)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.errors import EpicEdgeError, ModelNotFoundError
from epic_edge.models import embedder_files
from epic_edge.optional import optional_import
from epic_edge.protocols import text_list

_HINT = "run `epic-edge export --device galaxy-z-flip6 --out DIR` and use DIR as the model folder"


def _import_runtime() -> tuple[Any, Any, Any]:
    what = "the ExecuTorch embedder"
    tokenizers = optional_import("tokenizers", "android", what)
    torch = optional_import("torch", "android", what)
    return optional_import("executorch.runtime", "android", what).Runtime, torch, tokenizers


class ExecuTorchEmbedder:
    """One loaded .pte method ("forward"): (ids, mask, types) of batch 1 -> (1, dim) unit rows."""

    def __init__(self, model_path: str | Path, tokenizer_path: str | Path, *,
                 max_length: int = 256) -> None:
        self.model_path, self.tokenizer_path = Path(model_path), Path(tokenizer_path)
        for what, path in (("model", self.model_path), ("tokenizer", self.tokenizer_path)):
            if not path.is_file():
                raise ModelNotFoundError(f"embedder {what} file {path} not found; {_HINT}")
        runtime, self._torch, tokenizers = _import_runtime()
        try:
            meta = json.loads((self.model_path.parent / "model.json").read_text("utf-8"))
        except (OSError, ValueError):
            meta = {}
        self.meta: dict[str, Any] = meta if isinstance(meta, dict) else {}
        # The program accepts sequences up to the length it was exported with.
        self.max_length = min(int(max_length), int(self.meta.get("max_length", max_length)))
        self._tokenizer = tokenizers.Tokenizer.from_file(str(self.tokenizer_path))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=self.max_length)
        try:
            program = runtime.get().load_program(str(self.model_path))
            self._method: Any = program.load_method("forward")
        except Exception as exc:  # the runtime raises RuntimeError/ValueError with codes
            raise ModelNotFoundError(f"{self.model_path} is not a loadable ExecuTorch program "
                                     f"({type(exc).__name__}: {str(exc)[:200]}); {_HINT}") from exc
        self._program = program
        self.dim: int = int(self.meta.get("dim") or self._run(["dim probe"]).shape[1])

    @property
    def fingerprint(self) -> str:
        name = self.meta.get("name") or self.model_path.parent.name
        return f"{name}:{self.meta.get('pooling', 'mean')}:{self.dim}:" \
               f"{self.meta.get('precision', 'fp32')}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = text_list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._run(texts)

    def _run(self, texts: list[str]) -> np.ndarray:
        if self._method is None:
            raise EpicEdgeError("this ExecuTorchEmbedder is closed")
        torch = self._torch
        rows = []
        for enc in self._tokenizer.encode_batch(texts):
            ids = list(enc.ids) if len(enc.ids) >= 2 else list(enc.ids) + [0] * (2 - len(enc.ids))
            mask = [1] * len(enc.ids) + [0] * (len(ids) - len(enc.ids))
            t_ids = torch.tensor([ids], dtype=torch.int64)
            out = self._method.execute([t_ids, torch.tensor([mask], dtype=torch.int64),
                                        torch.zeros_like(t_ids)])[0]
            rows.append(np.asarray(out, dtype=np.float32)[0])
        result = np.vstack(rows)
        norms = np.linalg.norm(result, axis=1, keepdims=True)
        return (result / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)

    def close(self) -> None:
        self._method = None
        self._program = None

    def __enter__(self) -> ExecuTorchEmbedder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @classmethod
    def from_config(cls, config: dict[str, Any], model_dir: Path) -> ExecuTorchEmbedder:
        """From a profile's [embedder]: `model` (.pte) and `tokenizer`, relative to model_dir."""
        model, tokenizer = embedder_files(config, model_dir)
        qnn = config.get("qnn_model")
        if config.get("prefer_qnn") and qnn and (Path(model_dir) / str(qnn)).is_file():
            model = Path(model_dir) / str(qnn)
            if not config.get("tokenizer"):
                tokenizer = model.parent / "tokenizer.json"
        return cls(model, tokenizer, max_length=int(config.get("max_length", 256)))
