"""Where model files live on this device: one folder, set by EPIC_EDGE_MODELS."""

from __future__ import annotations

import os
from pathlib import Path


def model_dir() -> Path:
    """The folder that holds exported models (default ~/.cache/epic-edge/models)."""
    env = os.environ.get("EPIC_EDGE_MODELS")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "epic-edge" / "models"
