"""`export_bundle`: every artifact a device profile needs, in one folder with a manifest."""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from epic_edge.errors import EpicEdgeError, ModelNotFoundError, ProfileError
from epic_edge.export.bundle import MANIFEST, PROFILE_FILE, read_manifest, write_manifest
from epic_edge.export.python_package import source_root, write_python_package
from epic_edge.profiles import Profile, load_profile

log = logging.getLogger(__name__)

GGUF_VERIFIERS = ("llama-cpp", "llama-server")


@dataclass
class ExportResult:
    """The bundle folder, its manifest path, and per-step status and seconds."""

    root: Path
    manifest: Path
    steps: list[dict[str, Any]] = field(default_factory=list)


def _prepare_out(out_dir: Path, profile: Profile, force: bool) -> None:
    if not out_dir.exists():
        out_dir.mkdir(parents=True)
        return
    if not out_dir.is_dir():
        raise EpicEdgeError(f"{out_dir} exists and is not a folder")
    if (out_dir / MANIFEST).is_file():
        old = read_manifest(out_dir).get("profile")
        if old != profile.name and not force:
            raise EpicEdgeError(f"{out_dir} holds a bundle for {old!r}; pick another --out or "
                                "pass --force to replace it")
        return
    if any(out_dir.iterdir()) and not force:
        raise EpicEdgeError(f"{out_dir} is not empty and holds no bundle; pick an empty folder "
                            "or pass --force")


def _embedder_dir(out_dir: Path, profile: Profile) -> Path:
    model = profile.embedder.get("model")
    if not model:
        raise ProfileError(f"profile {profile.name!r} names no embedder.model")
    return out_dir / Path(str(model)).parent


def _export_embedder(out_dir: Path, profile: Profile, int8: bool, qnn: bool,
                     step: Callable[..., Any]) -> dict[str, Any]:
    cfg = profile.embedder
    backend = cfg.get("backend")
    folder = _embedder_dir(out_dir, profile)
    max_length = int(cfg.get("max_length", 256))
    facts: dict[str, Any] = {"backend": backend, "file": cfg.get("model"),
                             "tokenizer": cfg.get("tokenizer"), "tau": profile.tau}
    if backend == "onnx":
        from epic_edge.export.onnx_embedder import export_minilm_onnx
        from epic_edge.export.onnx_int8 import INT8_NAME, agreement, quantize_int8

        model = step("embedder onnx fp32", export_minilm_onnx, folder)
        if int8 or Path(str(cfg.get("model"))).name == INT8_NAME:  # the profile embeds with it
            q = step("embedder onnx int8", quantize_int8, model)
            facts["int8"] = {"file": q.relative_to(out_dir).as_posix(), "per_channel": True,
                             **agreement(model, q, folder / "tokenizer.json")}
    elif backend == "coreml":
        from epic_edge.export.coreml_embedder import export_coreml

        step("embedder coreml", export_coreml, folder, max_length=max_length,
             compute_units=str(cfg.get("compute_units", "CPU_AND_NE")),
             precision=str(cfg.get("precision", "fp16")))
    elif backend == "executorch":
        from epic_edge.export.executorch_embedder import export_executorch, qnn_sdk_root

        step("embedder executorch xnnpack", export_executorch, folder, delegate="xnnpack",
             max_length=max_length)
        try:
            qnn_sdk_root()
            have_sdk = True
        except ModelNotFoundError as exc:
            if qnn:
                raise
            have_sdk, reason = False, str(exc)
        if have_sdk:
            step("embedder executorch qnn", export_executorch, folder, delegate="qnn",
                 max_length=max_length, soc=str(cfg.get("soc", "SM8650")))
        else:
            step("embedder executorch qnn", None, skipped=reason)
    else:
        raise ProfileError(f"no export for embedder backend {backend!r}")
    meta = json.loads((folder / "model.json").read_text(encoding="utf-8"))
    keys = ("name", "dim", "pooling", "normalize", "max_length", "precision", "format",
            "delegate", "compute_units")
    facts.update({k: meta[k] for k in keys if k in meta})
    return facts


def _export_llm(out_dir: Path, profile: Profile, step: Callable[..., Any]) -> dict[str, Any]:
    from epic_edge.export.gguf import find_packaged_gguf, gguf_quantisation, install_gguf

    cfg = profile.verifier
    backend = cfg.get("backend")
    if backend in GGUF_VERIFIERS:
        path = step("llm gguf", install_gguf, out_dir)
        if cfg.get("model") and Path(str(cfg["model"])).name != path.name:
            raise ProfileError(f"profile {profile.name!r} wants verifier.model {cfg['model']!r}"
                               f" but the packaged GGUF is {path.name}")
        return {"backend": backend, "file": path.name, "format": "gguf",
                "quantisation": gguf_quantisation(path)}
    if backend == "mlx":
        from epic_edge.export.mlx_llm import export_mlx

        target = out_dir / str(cfg.get("model", "smollm2-135m-instruct-mlx-q4"))
        bits = int(cfg.get("bits", 4))
        step("llm mlx", export_mlx, find_packaged_gguf(), target, bits=bits)
        return {"backend": backend, "file": target.relative_to(out_dir).as_posix(),
                "format": "mlx", "quantisation": f"mlx affine {bits}-bit (group 64)",
                "source_quantisation": gguf_quantisation(find_packaged_gguf())}
    if backend == "template":
        return {"backend": backend, "file": None, "format": "none", "quantisation": None}
    if backend == "learned":
        return _export_learned(out_dir, profile, step)
    raise ProfileError(f"no export for verifier backend {backend!r}")


def _export_learned(out_dir: Path, profile: Profile, step: Callable[..., Any]) -> dict[str, Any]:
    """The learned decision (built at setup) in the profile's format, plus the GGUF when an
    LLM writes instructions."""
    from epic_edge.export.gguf import gguf_quantisation, install_gguf
    from epic_edge.models import model_dir

    from .learned_bundle import export_learned_decision

    cfg = profile.verifier
    folder = Path(str(cfg["model"])).parent
    src = model_dir() / folder
    if not (src / "model.onnx").is_file():
        raise ModelNotFoundError(
            f"the learned verifier is not installed at {src}; build it with: "
            f"python -m epic_edge.export.train_verifier --out {src}")
    facts: dict[str, Any] = {"backend": "learned", **export_learned_decision(
        src, out_dir, cfg, step), "file": None, "format": "none", "quantisation": None}
    if cfg.get("instructions", "llm") == "llm" and cfg.get("llm_backend") in GGUF_VERIFIERS:
        path = step("llm gguf", install_gguf, out_dir)
        facts.update(file=path.name, format="gguf", quantisation=gguf_quantisation(path))
    return facts


def export_bundle(profile: str | Path | Profile, out_dir: Path, *, int8: bool = True,
                  qnn: bool = False, force: bool = False,
                  progress: Callable[[str], None] | None = None) -> ExportResult:
    """Export the embedder, tokenizer and verifier LLM for `profile` into `out_dir`.

    Writes profile.toml (the profile as shipped), python/ (a wheel of epic-edge and a
    requirements.txt pinned to the versions installed here) and manifest.json (hashes, sizes,
    model facts, library versions). Steps that need hardware or an SDK that is absent are
    recorded as skipped with the reason (QNN without $QNN_SDK_ROOT), or fail when asked for
    (qnn=True).
    """
    prof = profile if isinstance(profile, Profile) else load_profile(profile)
    if prof.path is None:
        raise ProfileError("export needs a profile loaded from a TOML file")
    out_dir = Path(out_dir)
    _prepare_out(out_dir, prof, force)
    steps: list[dict[str, Any]] = []

    def step(name: str, fn: Callable[..., Any] | None, *args: Any, skipped: str = "",
             **kwargs: Any) -> Any:
        if fn is None:
            steps.append({"step": name, "status": "skipped", "reason": skipped})
            if progress:
                progress(f"{name}: skipped ({skipped})")
            return None
        if progress:
            progress(f"{name} ...")
        start = time.perf_counter()
        result = fn(*args, **kwargs)
        steps.append({"step": name, "status": "done",
                      "seconds": round(time.perf_counter() - start, 2)})
        return result

    shutil.copyfile(prof.path, out_dir / PROFILE_FILE)
    facts = {"embedder": _export_embedder(out_dir, prof, int8, qnn, step),
             "llm": _export_llm(out_dir, prof, step),
             "python": step("python wheel + requirements",
                            write_python_package if source_root() else None, out_dir, prof,
                            skipped="epic-edge is installed from a wheel, not run from source"),
             "steps": steps, "retrieval": dict(prof.retrieval)}
    manifest = write_manifest(out_dir, prof, facts)
    return ExportResult(root=out_dir, manifest=manifest, steps=steps)
