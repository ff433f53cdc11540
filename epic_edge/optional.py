"""Optional dependencies: import a module an extra provides, or say which extra installs it."""

from __future__ import annotations

import importlib
from types import ModuleType

from epic_edge.errors import MissingExtraError

# The distribution that provides each optional top-level module, as pyproject's extras list it
# (tests/test_optional_imports.py checks every optional_import against pyproject.toml).
DISTRIBUTIONS = {
    "accelerate": "accelerate", "coremltools": "coremltools", "cryptography": "cryptography",
    "executorch": "executorch", "faiss": "faiss-cpu", "gguf": "gguf", "jinja2": "jinja2",
    "langchain_core": "langchain-core", "llama_cpp": "llama-cpp-python",
    "matplotlib": "matplotlib", "mcp": "mcp", "mlx": "mlx", "mlx_lm": "mlx-lm", "onnx": "onnx",
    "onnxruntime": "onnxruntime", "pydantic": "langchain-core", "ray": "ray",
    "sentence_transformers": "sentence-transformers",
    "tokenizers": "tokenizers", "torch": "torch", "transformers": "transformers",
}


# Extras of the lab's own distribution (bench/pyproject.toml), installed from the checkout:
# "lab" is the lab itself (its dependencies), the others its optional extras.
LAB_EXTRAS = {"lab": "pip install -e bench", "ray": "pip install -e 'bench[ray]'"}


def missing_extra(purpose: str, extra: str, cause: object = None) -> MissingExtraError:
    """The one message for a missing optional package: what needs it and the extra to install."""
    why = f" ({cause})" if cause else ""
    command = LAB_EXTRAS.get(extra, f"pip install 'epic-edge[{extra}]'")
    return MissingExtraError(f"{purpose} needs the [{extra}] extra{why}; install it with: "
                             f"{command}")


def optional_import(module: str, extra: str, purpose: str) -> ModuleType:
    """Import `module` (dotted names allowed) or raise MissingExtraError naming `extra`."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise missing_extra(purpose, extra, exc) from exc
