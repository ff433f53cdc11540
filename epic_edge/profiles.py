"""Device profiles: TOML files that pick backends, model files, tau and budgets."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from epic_edge.errors import ProfileError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEFAULT_PROFILE = "linux-cpu"


@dataclass(frozen=True)
class Profile:
    """One device profile; each section is the config dict handed to a backend factory."""

    name: str
    description: str = ""
    platform: str = "any"
    embedder: dict[str, Any] = field(default_factory=dict)
    verifier: dict[str, Any] = field(default_factory=dict)
    index: dict[str, Any] = field(default_factory=dict)
    retrieval: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None

    @property
    def tau(self) -> float:
        if "tau" not in self.embedder:
            raise ProfileError(f"profile {self.name!r} sets no embedder.tau")
        return float(self.embedder["tau"])

    @classmethod
    def from_dict(cls, data: dict[str, Any], path: Path | None = None) -> Profile:
        if "name" not in data or "embedder" not in data:
            raise ProfileError(f"profile {path or data!r} needs at least 'name' and [embedder]")
        known = {"name", "description", "platform", "embedder", "verifier", "index", "retrieval"}
        unknown = set(data) - known
        if unknown:
            raise ProfileError(f"profile {data['name']!r} has unknown keys: {sorted(unknown)}")
        return cls(**{k: data[k] for k in known if k in data}, path=path)


def _builtin_dir() -> Path:
    return Path(str(resources.files("epic_edge.devices")))


def list_profiles() -> list[str]:
    return sorted(p.stem for p in _builtin_dir().glob("*.toml"))


def load_profile(name_or_path: str | Path = DEFAULT_PROFILE) -> Profile:
    """Load a shipped profile by name, or any profile TOML by path."""
    path = Path(name_or_path)
    if path.suffix != ".toml":
        path = _builtin_dir() / f"{name_or_path}.toml"
        if not path.exists():
            raise ProfileError(
                f"unknown device profile {str(name_or_path)!r}; "
                f"shipped profiles: {', '.join(list_profiles())}"
            )
    if not path.exists():
        raise ProfileError(f"profile file {path} does not exist")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ProfileError(f"profile {path} is not valid TOML: {exc}") from exc
    return Profile.from_dict(data, path)
