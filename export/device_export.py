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

from epic_edge import registry
from epic_edge.errors import EpicEdgeError, ModelNotFoundError, ProfileError
from epic_edge.export.bundle import MANIFEST, PROFILE_FILE, read_manifest, write_manifest
from epic_edge.export.bundle_readme import write_app_files
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


@dataclass
class ExportJob:
    """What a backend's exporter (its registry row's `exporter`) works on."""

    out_dir: Path
    profile: Profile
    step: Callable[..., Any]
    int8: bool = True
    qnn: bool = False

    @property
    def embedder_dir(self) -> Path:
        return _embedder_dir(self.out_dir, self.profile)


def _export_embedder(job: ExportJob) -> dict[str, Any]:
    cfg = job.profile.embedder
    row = registry.backend("embedder", cfg.get("backend"))
    if not row.exporter:
        raise ProfileError(f"no export for embedder backend {row.name!r}")
    facts: dict[str, Any] = {"backend": row.name, "file": cfg.get("model"),
                             "tokenizer": cfg.get("tokenizer"), "tau": job.profile.tau}
    facts.update(registry.resolve(row.exporter)(job) or {})
    meta = json.loads((job.embedder_dir / "model.json").read_text(encoding="utf-8"))
    keys = ("name", "dim", "pooling", "normalize", "max_length", "precision", "format",
            "delegate", "compute_units")
    facts.update({k: meta[k] for k in keys if k in meta})
    return facts


def export_onnx(job: ExportJob) -> dict[str, Any]:
    from epic_edge.export.minilm_onnx import export_minilm_onnx
    from epic_edge.export.onnx_int8 import INT8_NAME, WEIGHT_STORAGE, agreement, quantize_int8

    folder = job.embedder_dir
    model = job.step("embedder onnx fp32", export_minilm_onnx, folder)
    if job.int8 or Path(str(job.profile.embedder.get("model"))).name == INT8_NAME:
        q = job.step("embedder onnx int8", quantize_int8, model)  # the profile embeds with it
        return {"int8": {"file": q.relative_to(job.out_dir).as_posix(), "per_channel": True,
                         "stored": WEIGHT_STORAGE,
                         **agreement(model, q, folder / "tokenizer.json")}}
    return {}


def export_coreml(job: ExportJob) -> dict[str, Any]:
    from epic_edge.export.minilm_coreml import export_coreml as export

    cfg = job.profile.embedder
    job.step("embedder coreml", export, job.embedder_dir,
             max_length=int(cfg.get("max_length", 256)),
             compute_units=str(cfg.get("compute_units", "CPU_AND_NE")),
             precision=str(cfg.get("precision", "fp16")))
    return {}


def export_executorch(job: ExportJob) -> dict[str, Any]:
    from epic_edge.export.minilm_executorch import export_executorch as export
    from epic_edge.export.minilm_executorch import is_int8_program, qnn_sdk_root

    cfg, folder = job.profile.embedder, job.embedder_dir
    max_length = int(cfg.get("max_length", 256))
    int8 = is_int8_program(str(cfg.get("model", "")))
    job.step(f"embedder executorch xnnpack{' int8' if int8 else ''}", export, folder,
             delegate="xnnpack", max_length=max_length, int8=int8)
    try:
        qnn_sdk_root()
    except ModelNotFoundError as exc:
        if job.qnn:
            raise
        job.step("embedder executorch qnn", None, skipped=str(exc))
        return {}
    job.step("embedder executorch qnn", export, folder, delegate="qnn",
             max_length=max_length, soc=str(cfg.get("soc", "SM8650")))
    return {}


def _export_llm(job: ExportJob) -> dict[str, Any]:
    row = registry.backend("verifier", job.profile.verifier.get("backend"))
    if not row.exporter:  # nothing to ship (the template verifier)
        return {"backend": row.name, "file": None, "format": "none", "quantisation": None}
    return registry.resolve(row.exporter)(job)


def export_gguf(job: ExportJob) -> dict[str, Any]:
    from epic_edge.export.gguf import gguf_quantisation, install_gguf

    cfg = job.profile.verifier
    path = job.step("llm gguf", install_gguf, job.out_dir)
    if cfg.get("model") and Path(str(cfg["model"])).name != path.name:
        raise ProfileError(f"profile {job.profile.name!r} wants verifier.model {cfg['model']!r}"
                           f" but the packaged GGUF is {path.name}")
    return {"backend": cfg.get("backend"), "file": path.name, "format": "gguf",
            "quantisation": gguf_quantisation(path)}


def export_mlx(job: ExportJob) -> dict[str, Any]:
    from epic_edge.export.gguf import find_packaged_gguf, gguf_quantisation
    from epic_edge.export.mlx_llm import export_mlx as export

    cfg = job.profile.verifier
    target = job.out_dir / str(cfg.get("model", "smollm2-135m-instruct-mlx-q4"))
    bits = int(cfg.get("bits", 4))
    job.step("llm mlx", export, find_packaged_gguf(), target, bits=bits)
    return {"backend": "mlx", "file": target.relative_to(job.out_dir).as_posix(),
            "format": "mlx", "quantisation": f"mlx affine {bits}-bit (group 64)",
            "source_quantisation": gguf_quantisation(find_packaged_gguf())}


def export_learned(job: ExportJob) -> dict[str, Any]:
    """The learned decision (built at setup) in the profile's format, plus the GGUF when an
    LLM writes instructions."""
    from epic_edge.export.gguf import gguf_quantisation, install_gguf
    from epic_edge.export.learned_bundle import export_learned_decision
    from epic_edge.models import model_dir

    cfg = job.profile.verifier
    folder = Path(str(cfg["model"])).parent
    src = model_dir() / folder
    if not (src / "model.onnx").is_file():
        raise ModelNotFoundError(
            f"the learned verifier is not installed at {src}; run `epic-edge setup` "
            f"(it installs it)")
    facts: dict[str, Any] = {"backend": "learned", **export_learned_decision(
        src, job.out_dir, cfg, job.step), "file": None, "format": "none", "quantisation": None}
    if cfg.get("instructions", "llm") == "llm" and cfg.get("llm_backend") in GGUF_VERIFIERS:
        path = job.step("llm gguf", install_gguf, job.out_dir)
        facts.update(file=path.name, format="gguf", quantisation=gguf_quantisation(path))
    return facts


def export_bundle(profile: str | Path | Profile, out_dir: Path, *, int8: bool = True,
                  qnn: bool = False, force: bool = False,
                  progress: Callable[[str], None] | None = None) -> ExportResult:
    """Export the embedder, tokenizer and verifier LLM for `profile` into `out_dir`.

    Writes profile.toml (the profile as shipped), python/ (a wheel of epic-edge and a
    requirements.txt: export/python_package.py), README.md, example_app.py and
    MEMORY-FORMAT.md (export/bundle_readme.py) and manifest.json (hashes, sizes, model facts,
    library versions). Steps that need hardware or an SDK that is absent are
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
    job = ExportJob(out_dir, prof, step, int8=int8, qnn=qnn)
    facts = {"embedder": _export_embedder(job), "llm": _export_llm(job),
             "python": step("python wheel + requirements",
                            write_python_package if source_root() else None, out_dir, prof,
                            skipped="epic-edge is installed from a wheel, not run from source"),
             "steps": steps, "retrieval": dict(prof.retrieval)}
    write_app_files(out_dir, prof)
    manifest = write_manifest(out_dir, prof, facts)
    return ExportResult(root=out_dir, manifest=manifest, steps=steps)
