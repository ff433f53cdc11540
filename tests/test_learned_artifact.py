"""The committed learned decision (artifacts/) is the lab's shipped recipe, and reproduces."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from epic_edge.export.artifacts import LEARNED_ARTIFACT, unpack_artifact

ROOT = Path(__file__).resolve().parents[1]
ARTIFACT = ROOT / LEARNED_ARTIFACT


def test_the_artifact_holds_the_shipped_decision_and_nothing_else(tmp_path):
    with tarfile.open(ARTIFACT, "r:xz") as tar:
        assert sorted(tar.getnames()) == ["model.json", "model.onnx", "tokenizer.json"]
    unpack_artifact(ARTIFACT, tmp_path)
    manifest = json.loads((tmp_path / "model.json").read_text("utf-8"))
    choice = json.loads((ROOT / "bench" / "labels" / "learned_default.json").read_text("utf-8"))
    assert manifest["learner"] == choice["learner"]["name"]
    assert manifest["threshold"] == choice["threshold"]
    assert manifest["precision"] == "fp32" and manifest["name"] == "epic-verifier-minilm"


def test_packing_an_unpacked_artifact_gives_the_same_files(tmp_path):
    artifact = pytest.importorskip("epic_edge_lab.verifier.artifact")
    unpack_artifact(ARTIFACT, tmp_path / "a")
    artifact.pack(tmp_path / "a", tmp_path / "again.tar.xz")
    unpack_artifact(tmp_path / "again.tar.xz", tmp_path / "b")
    for name in artifact.FILES:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


@pytest.mark.slow
def test_retraining_the_shipped_recipe_reproduces_the_artifact(tmp_path):
    """~10 min on 2 cores: `epic-edge-lab train-verifier --check` does the same."""
    from epic_edge_lab.verifier.artifact import check_artifact
    from epic_edge_lab.verifier.train import train_shipped

    train_shipped(tmp_path)
    result = check_artifact(tmp_path)
    assert result["reproduces"], result
