"""Runtimes for the learned decision's network: ONNX Runtime, ExecuTorch (.pte), Core ML.

The learned verifier tokenises and pads; a runner turns padded int64 (batch, width) arrays
(input_ids, attention_mask, token_type_ids) into rows (siamese: sentence embeddings;
cross-encoder: one Keep logit). The runtime follows the model file: model.onnx (with the
profile's execution providers, falling back to CPU), model.<delegate>.pte, model.mlpackage.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.backends.runtime_support import onnx_providers, require_macos
from epic_edge.errors import ModelNotFoundError
from epic_edge.optional import optional_import

SUFFIX_FORMATS = {".onnx": "onnx", ".pte": "executorch", ".mlpackage": "coreml"}
SETUP_HINT = "run `epic-edge setup` (it installs the learned decision)"
DEVICE_HINT = "export the device's bundle with: epic-edge export --device PROFILE --out DIR"


class OnnxRunner:
    """One ONNX Runtime session; `providers` as a profile gives them (names or (name, options))."""

    def __init__(self, path: Path, *, threads: int = 0,
                 providers: Sequence[Any] | None = None) -> None:
        ort = optional_import("onnxruntime", "cpu", "the learned verifier")
        opts = ort.SessionOptions()
        if threads:
            opts.intra_op_num_threads = int(threads)
        try:
            self.session: Any = ort.InferenceSession(
                str(path), opts, providers=onnx_providers(ort, providers))
        except Exception as exc:  # onnxruntime raises its own types for bad files
            raise ModelNotFoundError(f"{path} is not a loadable ONNX model ({exc}); "
                                     f"{SETUP_HINT}") from exc
        self.inputs = [i.name for i in self.session.get_inputs()]

    @property
    def providers(self) -> list[str]:
        return list(self.session.get_providers())

    def run(self, arrays: dict[str, np.ndarray]) -> np.ndarray:
        out = self.session.run(None, {n: arrays[n] for n in self.inputs})[0]
        return np.asarray(out, dtype=np.float64)


class ExecuTorchRunner:
    """A .pte program of batch 1 (XNNPACK or QNN); rows run one at a time, unpadded."""

    providers = ["executorch"]

    def __init__(self, path: Path, **_: Any) -> None:
        torch = optional_import("torch", "android", "the ExecuTorch decision")
        Runtime = optional_import("executorch.runtime", "android",
                                  "the ExecuTorch decision").Runtime
        self._torch = torch
        try:
            self._program = Runtime.get().load_program(str(path))
            self._method: Any = self._program.load_method("forward")
        except Exception as exc:  # the runtime raises RuntimeError/ValueError with codes
            raise ModelNotFoundError(f"{path} is not a loadable ExecuTorch program "
                                     f"({type(exc).__name__}: {str(exc)[:200]}); "
                                     f"{DEVICE_HINT}") from exc

    def run(self, arrays: dict[str, np.ndarray]) -> np.ndarray:
        torch, rows = self._torch, []
        for row in range(arrays["input_ids"].shape[0]):
            n = max(2, int(arrays["attention_mask"][row].sum()))  # the program takes >= 2 tokens
            feed = [torch.from_numpy(np.ascontiguousarray(arrays[k][row:row + 1, :n]))
                    for k in ("input_ids", "attention_mask", "token_type_ids")]
            rows.append(np.asarray(self._method.execute(feed)[0], dtype=np.float64)
                        .reshape(1, -1))
        return np.vstack(rows)


class CoreMLRunner:
    """An .mlpackage ML program (int32 inputs); Core ML predicts on macOS only."""

    def __init__(self, path: Path, *, compute_units: str = "CPU_AND_NE", **_: Any) -> None:
        require_macos()
        ct = optional_import("coremltools", "apple", "the Core ML decision")
        self._model: Any = ct.models.MLModel(  # pragma: no cover - macOS only
            str(path), compute_units=getattr(ct.ComputeUnit, compute_units))
        spec = self._model.get_spec()  # pragma: no cover
        self.inputs = [f.name for f in spec.description.input]  # pragma: no cover
        self._output = spec.description.output[0].name  # pragma: no cover
        self.providers = [f"coreml:{compute_units}"]  # pragma: no cover

    def run(self, arrays: dict[str, np.ndarray]) -> np.ndarray:  # pragma: no cover - macOS
        feed = {n: arrays[n].astype(np.int32) for n in self.inputs}
        return np.asarray(self._model.predict(feed)[self._output], dtype=np.float64)


def open_runner(path: Path, *, threads: int = 0, providers: Sequence[Any] | None = None,
                compute_units: str = "CPU_AND_NE") -> Any:
    """The runner for the model file's format (.onnx, .pte, .mlpackage)."""
    path = Path(path)
    if path.suffix == ".pte":
        return ExecuTorchRunner(path)
    if path.suffix == ".mlpackage":
        return CoreMLRunner(path, compute_units=compute_units)
    return OnnxRunner(path, threads=threads, providers=providers)


def runs_here(config: dict[str, Any]) -> tuple[list[str], list[str]]:
    """`devices`: the learned decision runs where its model file's runtime runs (.onnx, .pte,
    .mlpackage)."""
    from epic_edge.registry import backend
    from epic_edge.runs_here import backend_notes

    runtime = SUFFIX_FORMATS.get(Path(str(config.get("model", ""))).suffix, "onnx")
    return backend_notes(backend("embedder", runtime), config)
