"""Backends by name: a device profile names them, this module imports them lazily."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from epic_edge.errors import MissingExtraError, ProfileError

# kind -> name -> ("module:factory", extra that provides its dependencies)
_BACKENDS: dict[str, dict[str, tuple[str, str]]] = {
    "embedder": {
        "onnx": ("epic_edge.backends.onnx_embedder:OnnxEmbedder.from_config", "cpu"),
        "coreml": ("epic_edge.backends.coreml_embedder:CoreMLEmbedder.from_config", "apple"),
        "executorch": ("epic_edge.backends.executorch_embedder:ExecuTorchEmbedder.from_config",
                       "android"),
    },
    "verifier": {
        "llama-cpp": ("epic_edge.backends.llama_cpp_verifier:LlamaCppVerifier.from_config", "cpu"),
        "template": ("epic_edge.backends.template_verifier:TemplateVerifier.from_config", ""),
        "llama-server": ("epic_edge.backends.http_verifier:LlamaServerVerifier.from_config",
                         "android"),
        "mlx": ("epic_edge.backends.mlx_verifier:MlxVerifier.from_config", "apple"),
        "learned": ("epic_edge.backends.cross_encoder_verifier:CrossEncoderVerifier.from_config",
                    "cpu"),
    },
    "index": {
        "faiss": ("epic_edge.backends.faiss_index:FaissIndex.from_config", "cpu"),
        "numpy": ("epic_edge.backends.numpy_index:NumpyIndex.from_config", ""),
    },
}


def register(kind: str, name: str, target: str, extra: str = "") -> None:
    """Register `target` ("module:callable") as backend `name` of `kind`."""
    if kind not in _BACKENDS:
        raise ProfileError(f"unknown backend kind {kind!r}; expected one of {sorted(_BACKENDS)}")
    _BACKENDS[kind][name] = (target, extra)


def names(kind: str) -> list[str]:
    return sorted(_BACKENDS.get(kind, {}))


def _resolve(target: str, extra: str) -> Any:
    module_name, _, attr_path = target.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        hint = f" Install it with: pip install 'epic-edge[{extra}]'" if extra else ""
        raise MissingExtraError(f"{target} needs a package that is missing ({exc}).{hint}") from exc
    for attr in attr_path.split("."):
        obj = getattr(obj, attr)
    return obj


def create(kind: str, config: dict[str, Any], model_dir: Path, **overrides: Any) -> Any:
    """Build the backend that `config["backend"]` names, from its profile section."""
    name = config.get("backend")
    table = _BACKENDS.get(kind)
    if table is None:
        raise ProfileError(f"unknown backend kind {kind!r}")
    if name not in table:
        raise ProfileError(f"unknown {kind} backend {name!r}; known: {', '.join(sorted(table))}")
    factory = _resolve(*table[name])
    return factory({**config, **overrides}, model_dir)
