"""Backends by name: one row per backend, read by profiles, `devices`, `export`, `setup`, Memory.

A row names its factory, the extra that installs it, the modules that extra provides, its
profile options (typed), what `devices` checks beyond those imports, and the functions that
`export` and `setup` run for it. Modules are named as "module:function" and imported lazily.
Adding a backend: its module in backends/, one row here, one extra in pyproject.toml.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from epic_edge.config_schema import COSINE, INT, POSITIVE, PROBABILITY, TEXT, Option, check_section
from epic_edge.errors import MissingExtraError, ProfileError
from epic_edge.optional import missing_extra, optional_import
from epic_edge.vectors import ENTRY_VECTORS, VECTOR_FORMATS

KINDS = ("embedder", "verifier", "index")
# llama.cpp decision modes and prompt formats (backends/llama_cpp_verifier.py documents them)
DECISIONS = ("keep-discard", "per-preference", "none")
PROMPT_FORMATS = ("auto", "chat", "completion")
COMPUTE_UNITS = ("ALL", "CPU_ONLY", "CPU_AND_GPU", "CPU_AND_NE")


@dataclass(frozen=True)
class Backend:
    """One backend: everything the runtime, `devices`, `export` and `setup` know of it."""

    kind: str
    name: str
    factory: str  # "module:callable", called with (config, model_dir)
    extra: str = ""  # the pyproject extra that installs `imports`
    imports: tuple[str, ...] = ()
    options: Mapping[str, Option] | None = None  # profile keys beyond the section's own
    check: str = ""  # "module:function" (config) -> (blocking problems, fallbacks)
    exporter: str = ""  # "module:function" (ExportJob) -> manifest facts
    setup: str = ""  # "module:function" (config, models, force) -> {role: installed path}

    def require(self) -> None:
        """Import what the backend needs, or raise MissingExtraError naming its extra."""
        for module in self.imports:
            optional_import(module, self.extra, f"the {self.name} {self.kind}")

    def missing_imports(self) -> list[str]:
        return [m for m in self.imports if not _installed(m)]


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


# keys every backend of a kind accepts (the section's own, read by Memory and the exporters)
SECTION_OPTIONS: dict[str, dict[str, Option]] = {
    "embedder": {"backend": TEXT, "tau": COSINE, "model": TEXT, "tokenizer": TEXT,
                 "max_length": POSITIVE, "batch_size": POSITIVE},
    "verifier": {"backend": TEXT, "model": TEXT, "threshold": PROBABILITY, "floor": PROBABILITY,
                 "max_preferences_per_item": POSITIVE, "max_instruction_tokens": POSITIVE},
    "index": {"backend": TEXT, "entry_vector": Option(str, ENTRY_VECTORS),
              "vectors": Option(str, VECTOR_FORMATS)},
}
_LLM = {"n_ctx": POSITIVE, "threads": INT}
_B = "epic_edge.backends."
_X = "epic_edge.export.device_export:"
_CHECK = "epic_edge.runs_here:"
_SETUP = "epic_edge.export.setup_steps:"

_ROWS = [
    Backend("embedder", "onnx", _B + "onnx_embedder:OnnxEmbedder.from_config", "cpu",
            ("onnxruntime", "tokenizers"),
            {"providers": Option(list), "provider_options": Option(dict), "threads": INT},
            check=_CHECK + "onnx", exporter=_X + "export_onnx", setup=_SETUP + "minilm_onnx"),
    Backend("embedder", "coreml", _B + "coreml_embedder:CoreMLEmbedder.from_config", "apple",
            ("coremltools", "tokenizers"),
            {"compute_units": Option(str, COMPUTE_UNITS), "precision": Option(str, ("fp16",
                                                                                   "fp32"))},
            check=_CHECK + "coreml", exporter=_X + "export_coreml"),
    Backend("embedder", "executorch",
            _B + "executorch_embedder:ExecuTorchEmbedder.from_config", "android",
            ("executorch", "tokenizers"),
            {"qnn_model": TEXT, "prefer_qnn": Option(bool), "soc": TEXT},
            check=_CHECK + "executorch", exporter=_X + "export_executorch"),
    Backend("verifier", "learned", _B + "learned_verifier:LearnedVerifier.from_config",
            "cpu", ("onnxruntime", "tokenizers"),
            {"threads": INT, "max_length": POSITIVE,
             "instructions": Option(str, ("template", "llm")),
             "llm_backend": Option(str, ("llama-cpp", "llama-server", "mlx")),
             "llm_model": TEXT, **_LLM,
             # the decision's runtime follows `model`: .onnx, .<delegate>.pte, .mlpackage
             "providers": Option(list), "provider_options": Option(dict),
             "compute_units": Option(str, COMPUTE_UNITS), "precision": Option(str, ("fp16",
                                                                                    "fp32")),
             "qnn_model": TEXT, "prefer_qnn": Option(bool), "soc": TEXT,
             "keep_score": TEXT},  # epic_edge.keep_score: rescues what the decision drops
            check=_B + "learned_runtimes:runs_here", exporter=_X + "export_learned",
            setup=_SETUP + "learned_verifier"),
    Backend("verifier", "llama-cpp", _B + "llama_cpp_verifier:LlamaCppVerifier.from_config",
            "llama", ("llama_cpp",),
            {"seed": INT, "decision": Option(str, DECISIONS), "n_gpu_layers": INT,
             "prompt_format": Option(str, PROMPT_FORMATS), **_LLM},
            check=_B + "llama_cpp_runtime:runs_here", exporter=_X + "export_gguf",
            setup=_SETUP + "gguf"),
    Backend("verifier", "llama-server", _B + "http_verifier:LlamaServerVerifier.from_config",
            "android", ("jinja2",),
            {"url": TEXT, "chat_template": TEXT, "timeout_s": Option(float, min=0.0),
             "retries": INT, "backoff_s": Option(float, min=0.0), "top_logprobs": POSITIVE,
             "max_item_chars": POSITIVE},
            check=_B + "http_verifier:runs_here", exporter=_X + "export_gguf",
            setup=_SETUP + "gguf"),
    Backend("verifier", "mlx", _B + "mlx_verifier:MlxVerifier.from_config", "apple",
            ("mlx.core", "mlx_lm"), {"bits": Option(int, (4, 8)), "max_item_tokens": POSITIVE},
            check=_CHECK + "mlx", exporter=_X + "export_mlx"),
    Backend("verifier", "template", _B + "template_verifier:TemplateVerifier.from_config",
            options={}),
    Backend("index", "faiss", _B + "faiss_index:FaissIndex.from_config", "cpu", ("faiss",),
            {"threads": POSITIVE}),
    Backend("index", "numpy", _B + "numpy_index:NumpyIndex.from_config", options={}),
]
_BACKENDS: dict[str, dict[str, Backend]] = {kind: {} for kind in KINDS}
for _row in _ROWS:
    _BACKENDS[_row.kind][_row.name] = _row


def register(kind: str, name: str, target: str, extra: str = "",
             imports: tuple[str, ...] = ()) -> None:
    """Register `target` ("module:callable") as backend `name` of `kind` (options unchecked)."""
    if kind not in _BACKENDS:
        raise ProfileError(f"unknown backend kind {kind!r}; expected one of {sorted(_BACKENDS)}")
    _BACKENDS[kind][name] = Backend(kind, name, target, extra, imports)


def names(kind: str) -> list[str]:
    return sorted(_BACKENDS.get(kind, {}))


def backend(kind: str, name: Any) -> Backend:
    """The row of backend `name` of `kind`; ProfileError when there is none."""
    table = _BACKENDS.get(kind)
    if table is None:
        raise ProfileError(f"unknown backend kind {kind!r}")
    if name not in table:
        raise ProfileError(f"unknown {kind} backend {name!r}; known: {', '.join(sorted(table))}")
    return table[name]


def check_config(kind: str, config: Mapping[str, Any], where: str) -> None:
    """ProfileError (one line, naming `where`) for an unknown backend, key or bad value."""
    try:
        row = backend(kind, config.get("backend"))
    except ProfileError as exc:
        raise ProfileError(f"profile {where}: {exc}") from None
    if row.options is not None:
        options = {**SECTION_OPTIONS[kind], **row.options}
        check_section(where, kind, config, options, f" for {kind} backend {row.name!r}")


def resolve(target: str, extra: str = "") -> Any:
    """The object "module:attr.attr" names; MissingExtraError when its module cannot import."""
    module_name, _, attr_path = target.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        if extra:
            raise missing_extra(target, extra, exc) from exc
        raise MissingExtraError(f"{target} cannot be imported ({exc})") from exc
    for attr in attr_path.split("."):
        obj = getattr(obj, attr)
    return obj


def create(kind: str, config: dict[str, Any], model_dir: Path, **overrides: Any) -> Any:
    """Build the backend that `config["backend"]` names, from its profile section."""
    row = backend(kind, config.get("backend"))
    row.require()
    factory = resolve(row.factory, row.extra)
    return factory({**config, **overrides}, model_dir)


def rows(kind: str | None = None) -> list[Backend]:
    return [r for k in KINDS if kind in (None, k) for r in _BACKENDS[k].values()]

