"""A calibrated linear score in a lab-written JSON file (the keep score, the question gate)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import numpy as np

from epic_edge.errors import ProfileError
from epic_edge.models import data_file, model_dir

Scored = TypeVar("Scored", bound="CalibratedScore")


@dataclass(frozen=True)
class CalibratedScore:
    """P = sigmoid(slope * (features . weights + bias) + offset), with a decision `threshold`
    in (0, 1); `trained_on` says on what (the lab writes it)."""

    weights: np.ndarray
    bias: float
    slope: float
    offset: float
    threshold: float
    trained_on: str = ""
    WHAT: ClassVar[str] = "calibrated score"  # how errors name it
    FEATURES: ClassVar[Any] = "features"  # what to_dict says the weights weigh

    @classmethod
    def load(cls: type[Scored], path: str | Path) -> Scored:
        """One written by the lab (JSON); a one-line ProfileError when it is not."""
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            score = cls(np.asarray(data["weights"], np.float64), float(data["bias"]),
                        float(data["slope"]), float(data["offset"]), float(data["threshold"]),
                        str(data.get("trained_on", "")), **cls.options_of(data))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ProfileError(f"{cls.WHAT} {path} is unreadable ({type(exc).__name__}: "
                               f"{exc})") from None
        if (score.weights.ndim != 1 or not 0.0 < score.threshold < 1.0
                or not np.all(np.isfinite(score.weights))):
            raise ProfileError(f"{cls.WHAT} {path}: threshold must be in (0, 1) and the "
                               f"weights one finite vector")
        return score

    @classmethod
    def options_of(cls, data: dict[str, Any]) -> dict[str, Any]:
        """A subclass's own fields, from its file (none here)."""
        return {}

    @classmethod
    def named(cls: type[Scored], name: str | None, models: Path | None = None
              ) -> Scored | None:
        """The one a profile names: None for none; a path (relative to the model folder), or
        the bare name of one the package ships (epic_edge/data/)."""
        return cls.load(data_file(name, models or model_dir())) if name else None

    def to_dict(self) -> dict[str, object]:
        return {"weights": [round(float(w), 7) for w in self.weights], "bias": self.bias,
                "slope": self.slope, "offset": self.offset, "threshold": self.threshold,
                "features": self.FEATURES, "trained_on": self.trained_on}

    def raw(self, features: np.ndarray) -> np.ndarray:
        """The uncalibrated score of each row."""
        features = np.asarray(features, np.float64)
        if features.shape[-1] != len(self.weights):
            raise ProfileError(f"{self.WHAT} expects {len(self.weights)} features (see its "
                               f"file's `features`); got {features.shape[-1]}")
        return features @ self.weights + self.bias

    def probabilities(self, features: np.ndarray) -> np.ndarray:
        """The calibrated probability of each row (a scalar array for one row)."""
        z = self.slope * self.raw(features) + self.offset
        return 1.0 / (1.0 + np.exp(-np.clip(z, -60.0, 60.0)))
