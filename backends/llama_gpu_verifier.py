"""llama.cpp verifier with GPU offload (Jetson's CUDA build); CPU with a warning where none."""

from __future__ import annotations

import inspect
import warnings
from pathlib import Path
from typing import Any

from epic_edge.errors import MissingExtraError

CUDA_BUILD_HINT = ('CMAKE_ARGS="-DGGML_CUDA=on" pip install --no-binary llama-cpp-python '
                   "llama-cpp-python==0.3.36")


def gpu_offload_supported() -> bool:
    """True when the installed llama-cpp-python was built with a GPU backend (CUDA, Metal...)."""
    try:
        import llama_cpp
    except ImportError as exc:
        raise MissingExtraError(f"the llama.cpp verifier needs llama-cpp-python ({exc}); "
                                "install it with: pip install 'epic-edge[jetson]'") from exc
    return bool(llama_cpp.llama_supports_gpu_offload())


def offload_layers(requested: int, supported: bool) -> int:
    """Layers to offload: `requested`, or 0 with a warning when this build cannot offload."""
    if requested > 0 and not supported:
        warnings.warn(
            f"n_gpu_layers={requested} asked for, but this llama-cpp-python build has no GPU "
            f"offload: the verifier runs on the CPU. On a Jetson build it with: {CUDA_BUILD_HINT}",
            RuntimeWarning, stacklevel=3)
        return 0
    return max(0, requested)


class GpuLlamaVerifier:
    """Factory only: builds the in-process llama.cpp verifier with the profile's offload."""

    @classmethod
    def from_config(cls, config: dict[str, Any], model_dir: Path) -> Any:
        from epic_edge.backends.llama_cpp_verifier import LlamaCppVerifier

        layers = offload_layers(int(config.get("n_gpu_layers", 0)), gpu_offload_supported())
        if layers and "n_gpu_layers" not in inspect.signature(LlamaCppVerifier.__init__).parameters:
            warnings.warn("LlamaCppVerifier takes no n_gpu_layers in this epic-edge version: "
                          "the verifier runs on the CPU", RuntimeWarning, stacklevel=2)
        return LlamaCppVerifier.from_config({**config, "n_gpu_layers": layers}, model_dir)
