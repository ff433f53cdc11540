"""Sentence embedder on ONNX Runtime + `tokenizers`: pooled or last_hidden_state graphs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from epic_edge.backends.runtime_support import onnx_providers
from epic_edge.backends.runtime_support import with_options as _with_options
from epic_edge.errors import EpicEdgeError, InvalidInputError, ModelNotFoundError
from epic_edge.models import embedder_files
from epic_edge.optional import optional_import
from epic_edge.protocols import text_list

_KNOWN_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_POOLED_NAMES = ("sentence_embedding", "sentence_embeddings", "embedding", "embeddings")
# Never "pooler_output": that is BERT's CLS+tanh head, not a sentence embedding.
_SETUP_HINT = "run `epic-edge setup` to export it"
_BROKEN_HINT = "delete it and run `epic-edge setup` again"


def _import_runtime() -> tuple[Any, Any]:
    return (optional_import("onnxruntime", "cpu", "the ONNX embedder"),
            optional_import("tokenizers", "cpu", "the ONNX embedder"))


def _read_manifest(model_path: Path) -> dict[str, Any]:
    """model.json beside the model, or {} when absent or unreadable."""
    path = model_path.parent / "model.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _normalise(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return (rows / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


class OnnxEmbedder:
    """Owns one onnxruntime.InferenceSession and one tokenizer; call close() when done."""

    def __init__(
        self,
        model_path: str | Path,
        tokenizer_path: str | Path,
        *,
        max_length: int = 256,
        threads: int = 0,
        providers: Sequence[str] | None = None,
        batch_size: int = 32,
    ) -> None:
        self.model_path = Path(model_path)
        self.tokenizer_path = Path(tokenizer_path)
        for what, path in (("model", self.model_path), ("tokenizer", self.tokenizer_path)):
            if not path.is_file():
                raise ModelNotFoundError(f"embedder {what} file {path} not found; {_SETUP_HINT}")
        if max_length < 2 or batch_size < 1:
            raise InvalidInputError("max_length must be >= 2 and batch_size >= 1")
        ort, tokenizers = _import_runtime()
        self.meta = _read_manifest(self.model_path)
        self.max_length = int(max_length)
        self.batch_size = int(batch_size)

        try:
            self._tokenizer = tokenizers.Tokenizer.from_file(str(self.tokenizer_path))
        except Exception as exc:
            raise ModelNotFoundError(
                f"{self.tokenizer_path} is not a readable tokenizer.json ({exc}); {_BROKEN_HINT}"
            ) from exc
        self._tokenizer.no_padding()  # we pad per batch ourselves
        self._tokenizer.enable_truncation(max_length=self.max_length)

        options = ort.SessionOptions()
        if threads > 0:
            options.intra_op_num_threads = int(threads)
        try:
            self._session: Any = ort.InferenceSession(
                str(self.model_path),
                sess_options=options,
                providers=self._providers(ort, providers),
            )
        except Exception as exc:
            raise ModelNotFoundError(
                f"{self.model_path} is not a loadable ONNX model ({type(exc).__name__}: "
                f"{str(exc).splitlines()[0][:200] if str(exc) else ''}); {_BROKEN_HINT}"
            ) from exc

        inputs = {i.name: i.type for i in self._session.get_inputs()}
        unknown = sorted(set(inputs) - set(_KNOWN_INPUTS))
        if unknown or "input_ids" not in inputs:
            self.close()
            raise ModelNotFoundError(
                f"{self.model_path} declares inputs {sorted(inputs)}; expected a subset of "
                f"{list(_KNOWN_INPUTS)} including input_ids; {_BROKEN_HINT}"
            )
        self._input_types = {
            n: np.int32 if t == "tensor(int32)" else np.int64 for n, t in inputs.items()
        }
        outputs = self._session.get_outputs()
        chosen = next((o for o in outputs if o.name in _POOLED_NAMES), None)
        chosen = chosen or next((o for o in outputs if o.name == "last_hidden_state"), outputs[0])
        self._output_name: str = chosen.name
        self._pooled = len(chosen.shape) == 2
        self.dim: int = self._find_dim(chosen.shape)

    _providers = staticmethod(onnx_providers)

    def _find_dim(self, shape: Sequence[Any]) -> int:
        if isinstance(self.meta.get("dim"), int):
            return int(self.meta["dim"])
        if shape and isinstance(shape[-1], int):
            return int(shape[-1])
        return int(self._run(["dim probe"]).shape[1])

    @property
    def fingerprint(self) -> str:
        """Name:pooling:dim:precision, from model.json when present, else derived."""
        name = self.meta.get("name") or self.model_path.parent.name or self.model_path.stem
        pooling = self.meta.get("pooling") or ("graph" if self._pooled else "mean")
        stem = self.model_path.stem.lower()
        guess = "int8" if any(t in stem for t in ("int8", "quant", "q8")) else "fp32"
        int8_copy = (self.meta.get("int8") or {}).get("file")
        # model.json describes the fp32 export; its int8 sibling is named in meta["int8"]
        precision = "int8" if self.model_path.name == int8_copy else (
            self.meta.get("precision") or guess)
        return f"{name}:{pooling}:{self.dim}:{precision}"

    @property
    def providers(self) -> list[str]:
        return list(self._session.get_providers()) if self._session is not None else []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return (len(texts), dim) float32 unit rows; texts longer than max_length truncate."""
        texts = text_list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._run(texts)

    def _run(self, texts: list[str]) -> np.ndarray:
        if self._session is None:
            raise EpicEdgeError("this OnnxEmbedder is closed")
        encodings = self._tokenizer.encode_batch(texts)
        order = np.argsort([len(e.ids) for e in encodings], kind="stable")  # less padding
        out: np.ndarray | None = None
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            vectors = self._run_batch([encodings[i] for i in rows])
            if out is None:
                out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
            out[rows] = vectors
        assert out is not None
        return out

    def _run_batch(self, encodings: list[Any]) -> np.ndarray:
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for row, enc in enumerate(encodings):
            n = len(enc.ids)
            ids[row, :n] = enc.ids
            mask[row, :n] = enc.attention_mask
            types[row, :n] = enc.type_ids
        arrays = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        feed = {
            name: arrays[name].astype(dtype, copy=False)
            for name, dtype in self._input_types.items()
        }
        result = np.asarray(self._session.run([self._output_name], feed)[0], dtype=np.float32)
        if result.ndim == 3:  # last_hidden_state: mean over real tokens
            weights = mask[:, :, None].astype(np.float32)
            result = (result * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        elif result.ndim != 2:
            raise EpicEdgeError(f"{self.model_path} output has unexpected shape {result.shape}")
        return _normalise(result)

    def close(self) -> None:
        """Release the ONNX Runtime session (idempotent)."""
        self._session = None

    def __enter__(self) -> OnnxEmbedder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"OnnxEmbedder({str(self.model_path)!r}, fingerprint={self.fingerprint!r})"

    @classmethod
    def from_config(cls, config: dict[str, Any], model_dir: Path) -> OnnxEmbedder:
        """Build from a profile's [embedder] section; paths are relative to model_dir."""
        model_path, tokenizer_path = embedder_files(config, model_dir)
        return cls(
            model_path,
            tokenizer_path,
            max_length=int(config.get("max_length", 256)),
            threads=int(config.get("threads", 0)),
            providers=_with_options(config, Path(model_dir)),
            batch_size=int(config.get("batch_size", 32)),
        )
