"""Device profiles: TOML files that pick backends, model files, tau and budgets."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from epic_edge.config_schema import COSINE, POSITIVE, TEXT, Option, check_section
from epic_edge.errors import ProfileError
from epic_edge.registry import KINDS, check_config
from epic_edge.stages import STEER_BY

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEFAULT_PROFILE = "linux-cpu"
PLATFORMS = ("any", "darwin-arm64", "android-arm64", "linux-aarch64-cuda")
TOP_LEVEL = {"name": TEXT, "description": TEXT, "platform": Option(str, PLATFORMS),
             "embedder": Option(dict), "verifier": Option(dict), "index": Option(dict),
             "retrieval": Option(dict), "budget": Option(dict)}
# [retrieval]: read by Memory.open into epic_edge.settings.MemorySettings
RETRIEVAL_OPTIONS = {"k": POSITIVE, "gate": COSINE, "item_gate": COSINE, "min_score": COSINE,
                     "item_gate_quantile": Option(float, min=0.0, max=1.0, exclusive=True),
                     "hedge": Option(float, min=0.0, exclusive=True),
                     "steer_weight": Option(float, min=0.0),
                     "steer_by": Option(str, STEER_BY),
                     "ease_steering_from": COSINE, "no_steering_from": COSINE,
                     "lexical": Option(float, min=0.0),
                     "confidence": Option(float, min=0.0),
                     "brevity": Option(float, min=0.0),
                     "question_gate": TEXT, "question_gate_below": COSINE,
                     "calibrated_for": TEXT}
# [budget]: the limits a memory created with this profile starts with (epic_edge.maintenance)
BUDGET_OPTIONS = {"max_entries": POSITIVE, "max_bytes": POSITIVE,
                  "half_life_days": Option(float, min=0.0, exclusive=True)}


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
    budget: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None

    @property
    def tau(self) -> float:
        if "tau" not in self.embedder:
            raise ProfileError(f"profile {self.name!r} sets no embedder.tau")
        return float(self.embedder["tau"])

    @classmethod
    def from_dict(cls, data: dict[str, Any], path: Path | None = None) -> Profile:
        """The profile `data` describes; a one-line ProfileError naming the file for an
        unknown key or a bad value in any section."""
        where = str(path) if path else repr(data.get("name", "?"))
        if "name" not in data or "embedder" not in data:
            raise ProfileError(f"profile {where} needs at least 'name' and [embedder]")
        unknown = set(data) - set(TOP_LEVEL)
        if unknown:
            raise ProfileError(f"profile {where} has unknown keys: {sorted(unknown)}")
        check_section(where, "profile", {k: v for k, v in data.items() if k in TOP_LEVEL
                                         and not isinstance(v, dict)}, TOP_LEVEL)
        for kind in KINDS:
            if kind in data:
                check_config(kind, data[kind], where)
        check_section(where, "retrieval", data.get("retrieval", {}), RETRIEVAL_OPTIONS)
        check_section(where, "budget", data.get("budget", {}), BUDGET_OPTIONS)
        return cls(**{k: data[k] for k in TOP_LEVEL if k in data}, path=path)


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
