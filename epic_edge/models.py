"""Where model files live on this device: one folder, set by EPIC_EDGE_MODELS."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import Any

from epic_edge.errors import ModelNotFoundError


def model_dir() -> Path:
    """The folder that holds exported models (default ~/.cache/epic-edge/models)."""
    env = os.environ.get("EPIC_EDGE_MODELS")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "epic-edge" / "models"


def data_file(name: str, model_dir: str | Path) -> Path:
    """The file a profile names for a small learned part (a keep score, a question gate): a
    path relative to model_dir, else the bare name of one the package ships (epic_edge/data/)."""
    path = Path(str(name)).expanduser()
    if not path.is_absolute() and not (Path(model_dir) / path).is_file() \
            and path.parent == Path():
        shipped = resources.files("epic_edge") / "data" / path.name
        if shipped.is_file():
            return Path(str(shipped))
    return path if path.is_absolute() else Path(model_dir) / path


def embedder_files(config: dict[str, Any], model_dir: str | Path) -> tuple[Path, Path]:
    """(model, tokenizer) of a profile's [embedder] section, both relative to model_dir;
    the tokenizer defaults to tokenizer.json beside the model."""
    if not config.get("model"):
        raise ModelNotFoundError("embedder config names no `model` file; check the profile")
    model = Path(model_dir) / str(config["model"])
    tok = config.get("tokenizer")
    return model, (Path(model_dir) / str(tok) if tok else model.parent / "tokenizer.json")
