"""The shipped learned decision as a committed artifact: pack it, retrain it, check it matches.

    epic-edge-lab train-verifier --check   # retrain (~10 min on 2 cores) and compare

`epic-edge setup` unpacks artifacts/epic-verifier-minilm.tar.xz (export/artifacts.py) instead
of training; this module is how the artifact was made and how anyone checks it reproduces: the
shipped recipe is deterministic for its seed, so a retraining gives the same model.json (but
its training time) and the same P(Keep) on every labelled pair (within TOLERANCE; the same
ONNX bytes where torch is the same). Another CPU's float rounding moves P(Keep) by about 1e-6,
another seed by a median 0.03 (docs/personal-stream.md): the tolerance sits between the two.
"""

from __future__ import annotations

import io
import json
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from epic_edge.export.artifacts import learned_artifact, unpack_artifact
from epic_edge.export.bundle import sha256_file

FILES = ("model.onnx", "model.json", "tokenizer.json")
TOLERANCE = 1e-5  # largest |delta P(Keep)| on the labelled pairs that still counts as the same
VOLATILE = ("train_seconds", "license")  # manifest fields a retraining may change (time, a path)


def pack(folder: Path, out: Path, files: tuple[str, ...] = FILES) -> Path:
    """Write `files` of a trained folder into a reproducible tar.xz (no times, owners or
    modes)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out, "w:xz", preset=9) as tar:
        for name in files:
            data = (folder / name).read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return out


def compare(trained: Path, shipped: Path, split: str = "all") -> dict[str, Any]:
    """A trained folder against the shipped one: bytes of each file, and P(Keep) of both models
    on the labelled pairs of `split`."""
    from epic_edge.backends.learned_verifier import LearnedVerifier
    from epic_edge_lab.calibrate import load_verification_set

    same = {name: sha256_file(trained / name) == sha256_file(shipped / name) for name in FILES}
    manifests = [{k: v for k, v in json.loads((folder / "model.json").read_text("utf-8")).items()
                  if k not in VOLATILE} for folder in (trained, shipped)]
    pairs = load_verification_set(split)
    prefs, passages = [p.preference for p in pairs], [p.passage for p in pairs]
    scores = [np.asarray(LearnedVerifier(folder / "model.onnx").score_pairs(prefs, passages))
              for folder in (trained, shipped)]
    delta = float(np.max(np.abs(scores[0] - scores[1])))
    threshold = float(manifests[1]["threshold"])
    flips = int(np.sum((scores[0] >= threshold) != (scores[1] >= threshold)))
    return {"same_bytes": same, "same_manifest": manifests[0] == manifests[1],
            "pairs": len(pairs), "max_abs_delta": delta, "decisions_differ": flips,
            "reproduces": manifests[0] == manifests[1] and delta <= TOLERANCE}


def check_artifact(trained: Path, artifact: Path | None = None) -> dict[str, Any]:
    """Unpack the committed artifact beside a fresh training and compare the two."""
    with tempfile.TemporaryDirectory(prefix="epic-artifact-") as tmp:
        shipped = Path(tmp)
        unpack_artifact(artifact or learned_artifact(), shipped)
        return compare(trained, shipped)
