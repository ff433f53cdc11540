"""The learned decision's step of a bundle export: its file in the profile's format, hashed."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from epic_edge.backends.learned_runtimes import SUFFIX_FORMATS
from epic_edge.errors import ModelNotFoundError, ProfileError

from .bundle import sha256_file
from .learned_decision import export_decision


def artifact_sha256(path: Path) -> str:
    """sha256 of a file, or of a folder's sorted (relative path, sha256) lines (.mlpackage)."""
    path = Path(path)
    if path.is_file():
        return sha256_file(path)
    lines = "".join(f"{p.relative_to(path).as_posix()} {sha256_file(p)}\n"
                    for p in sorted(path.rglob("*")) if p.is_file())
    return hashlib.sha256(lines.encode("utf-8")).hexdigest()


def decision_format(model: str) -> str:
    """"onnx", "executorch" or "coreml" from a profile's [verifier] model path."""
    fmt = SUFFIX_FORMATS.get(Path(model).suffix)
    if fmt is None:
        raise ProfileError(f"learned decision model {model!r}: expected a .onnx, .pte or "
                           ".mlpackage path")
    return fmt


def export_learned_decision(src: Path, out_dir: Path, cfg: dict[str, Any],
                            step: Callable[..., Any]) -> dict[str, Any]:
    """Write the profile's decision file(s) under out_dir; returns the manifest facts."""
    from .minilm_executorch import is_int8_program, qnn_sdk_root

    model = str(cfg["model"])
    fmt = decision_format(model)
    target = out_dir / Path(model).parent
    options: dict[str, Any] = {}
    if fmt == "executorch":
        options["delegate"] = Path(model).stem.rsplit(".", 1)[-1]
        if is_int8_program(model):
            options["int8"] = True
    elif fmt == "coreml":
        options = {"compute_units": str(cfg.get("compute_units", "ALL")),
                   "precision": str(cfg.get("precision", "fp32"))}
    path = step(f"learned decision {fmt}", export_decision, src, target, fmt, **options)
    if path.name != Path(model).name:
        raise ProfileError(f"verifier.model {model!r} but the export wrote {path.name}")
    facts = {"decision_file": model, "decision_format": fmt,
             "decision_sha256": artifact_sha256(path),
             "decision_source_sha256": sha256_file(src / "model.onnx"), **options}
    qnn = cfg.get("qnn_model")
    if fmt == "executorch" and qnn:
        try:
            qnn_sdk_root()
        except ModelNotFoundError as exc:
            step("learned decision executorch qnn", None, skipped=str(exc))
        else:  # pragma: no cover - needs the Qualcomm SDK
            step("learned decision executorch qnn", export_decision, src, target, fmt,
                 delegate="qnn", soc=str(cfg.get("soc", "SM8650")))
            facts["decision_qnn_file"] = str(qnn)
    return facts
