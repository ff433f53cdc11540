"""The Python side of a bundle: a wheel of epic-edge and a requirements file, exact versions."""

from __future__ import annotations

import importlib.metadata
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.requirements import Requirement

from epic_edge.errors import EpicEdgeError
from epic_edge.profiles import Profile

PYTHON_DIR = "python"
REQUIREMENTS = "requirements.txt"
# The optional extra (pyproject.toml) holding the runtime libraries of a profile's platform.
PLATFORM_EXTRAS = {"linux-aarch64-cuda": "jetson", "darwin-arm64": "apple",
                   "android-arm64": "android"}
# What a wheel is built from: the project's source tree, copied so the build leaves no trace.
_SOURCE_PARTS = ("pyproject.toml", "README.md", "epic_edge", "backends", "export", "devices")
_EXTRA_MARKER = re.compile(r'\s*(and\s+)?extra\s*==\s*"[^"]+"(\s+and)?')


def extra_for(profile: Profile) -> str:
    return PLATFORM_EXTRAS.get(profile.platform, "cpu")


def source_root() -> Path | None:
    """The project checkout epic-edge runs from, or None when installed from a wheel."""
    import epic_edge

    root = Path(epic_edge.__file__).resolve().parent.parent
    return root if (root / "pyproject.toml").is_file() and (root / "backends").is_dir() else None


def build_wheel(out_dir: Path) -> Path:
    """Build epic-edge's wheel into out_dir from the source tree (offline, no isolation)."""
    root = source_root()
    if root is None:
        raise EpicEdgeError("epic-edge is not running from its source tree, so no wheel can be "
                            "built; copy the wheel you installed into the bundle instead")
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="epic-edge-wheel-") as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        for part in _SOURCE_PARTS:
            path = root / part
            if path.is_dir():
                shutil.copytree(path, src / part, ignore=shutil.ignore_patterns(
                    "__pycache__", "*.pyc", "results"))
            elif path.is_file():
                shutil.copy2(path, src / part)
        done = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
             "--no-index", "--disable-pip-version-check", "-q", "-w", str(out_dir), str(src)],
            capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise EpicEdgeError(f"building the epic-edge wheel failed: {tail[0]}")
    wheels = sorted(out_dir.glob("epic_edge-*.whl"))
    if not wheels:
        raise EpicEdgeError("pip built no epic-edge wheel")
    return wheels[-1]


def pinned_requirements(extra: str) -> list[str]:
    """Lines of a requirements file: epic-edge's dependencies and those of `extra`, each
    pinned to the public version installed here (no local build label such as "+cpu"); a
    dependency not installed here keeps its range."""
    lines = []
    for text in importlib.metadata.requires("epic-edge") or []:
        req = Requirement(text)
        marker = str(req.marker) if req.marker else ""
        if "extra" in marker and f'extra == "{extra}"' not in marker:
            continue
        rest = _EXTRA_MARKER.sub("", marker).strip()
        name = req.name + (f"[{','.join(sorted(req.extras))}]" if req.extras else "")
        try:
            # a local label names this machine's build ("2.13.0+cpu": PyTorch's x86 CPU
            # index); the public version it builds is what another platform can install
            spec = f"=={importlib.metadata.version(req.name).split('+', 1)[0]}"
            note = ""
        except importlib.metadata.PackageNotFoundError:
            spec, note = str(req.specifier), "  # not installed where exported: pip chooses"
        lines.append(f"{name}{spec}{f'; {rest}' if rest else ''}{note}")
    return lines


def write_python_package(out_dir: Path, profile: Profile) -> dict[str, str]:
    """out_dir/python/: the epic-edge wheel and requirements.txt for the profile's extra."""
    folder = out_dir / PYTHON_DIR
    for old in folder.glob("epic_edge-*.whl"):
        old.unlink()
    wheel = build_wheel(folder)
    extra = extra_for(profile)
    header = [f"# epic-edge runtime for the {profile.name} profile (extra [{extra}]): the "
              f"versions installed where it was exported (Python {platform.python_version()}, "
              f"{platform.system()} {platform.machine()}).",
              "# Another Python version or platform may need other versions: see the device page.",
              *(["# Not for the phone: PyPI has no Android build of numpy, tokenizers, faiss-cpu "
                 "or executorch; README.md says what runs on it."]
                if profile.platform == "android-arm64" else []),
              f"# pip install -r {REQUIREMENTS} {wheel.name}"]
    (folder / REQUIREMENTS).write_text("\n".join(header + pinned_requirements(extra)) + "\n",
                                       encoding="utf-8")
    return {"wheel": f"{PYTHON_DIR}/{wheel.name}", "requirements": f"{PYTHON_DIR}/{REQUIREMENTS}",
            "extra": extra}
