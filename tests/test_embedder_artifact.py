"""The committed embedder weights (artifacts/) are the lab's shipped recipe, and reproduce."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import numpy as np
import pytest

from epic_edge.export.artifacts import EMBEDDER_ARTIFACT, unpack_artifact
from epic_edge.export.minilm_onnx import MODEL_NAME

ROOT = Path(__file__).resolve().parents[1]
ARTIFACT = ROOT / EMBEDDER_ARTIFACT


def test_the_artifact_holds_the_shipped_embedder_and_nothing_else(tmp_path):
    training = pytest.importorskip("epic_edge_lab.embedder_training")
    with tarfile.open(ARTIFACT, "r:xz") as tar:
        assert sorted(tar.getnames()) == sorted(training.FILES)
    unpack_artifact(ARTIFACT, tmp_path)
    manifest = json.loads((tmp_path / "model.json").read_text("utf-8"))
    assert manifest["name"] == MODEL_NAME and manifest["weights"] == "fp16"
    assert training.TUNED_ON in manifest["tuned_on"]
    assert manifest["left_for_the_keep_score_and_gate"] == training.FIT_ON
    assert manifest["settings"] == training.SETTINGS


def test_the_check_sees_a_changed_weight_and_a_changed_model(tmp_path):
    """compare() is what `train-embedder --check` reports: the artifact against itself
    reproduces exactly; one weight moved by more than one fp16 step is no longer exact (and
    barely moves a vector); the feed-forward weights moved by 1% move vectors past the output
    tolerance (a rerun on another CPU moved them by 2e-7, another seed by 2e-2)."""
    training = pytest.importorskip("epic_edge_lab.embedder_training")
    from safetensors.numpy import load_file, save_file

    probe = ["Tokyo 14h, never again", "I avoid flights longer than three hours",
             "wifi password is on the fridge", "where should we eat on Sunday?"]
    unpack_artifact(ARTIFACT, tmp_path)
    result = training.compare(tmp_path, probe=probe)
    assert result["exact"] and result["reproduces"] and result["max_output_gap"] < 1e-6
    weights = tmp_path / "model.safetensors"
    tensors = load_file(str(weights))
    name = sorted(tensors)[0]
    tensors[name] = tensors[name].copy()
    tensors[name].flat[0] += np.float16(4) * np.spacing(tensors[name].flat[0])
    save_file(tensors, str(weights), metadata={"format": "pt"})
    result = training.compare(tmp_path, probe=probe)
    assert not result["exact"] and result["max_fp16_steps"] > training.TOLERANCE
    assert result["weights_moved"] == 1
    noise = np.random.default_rng(0)
    for layer in (k for k in tensors if k.endswith("intermediate.dense.weight")):
        moved = 1 + 0.01 * noise.standard_normal(tensors[layer].shape)
        tensors[layer] = (tensors[layer] * moved).astype(np.float16)
    save_file(tensors, str(weights), metadata={"format": "pt"})
    result = training.compare(tmp_path, probe=probe)
    assert not result["reproduces"] and result["max_output_gap"] > training.OUTPUT_TOLERANCE


def test_training_pairs_read_every_kind_of_label():
    training = pytest.importorskip("epic_edge_lab.embedder_training")
    from types import SimpleNamespace

    persona = SimpleNamespace(
        preferences={"p1": "I am vegan"}, items=[{"id": "a", "text": "tofu stir fry"},
                                                 {"id": "b", "text": "dentist at 3"}],
        bears_on={"a": ("p1",)},
        questions=[SimpleNamespace(text="dinner?", answers=["a"], prefs=["p1"])])
    gate = [{"preferences": [{"id": "x", "text": "I hate flying"}],
             "questions": [{"text": "how to get to Rome?", "prefs": ["x"]}]}]
    assert training.training_pairs([persona], gate) == [
        ("I am vegan", "tofu stir fry"), ("dinner?", "tofu stir fry"), ("dinner?", "I am vegan"),
        ("how to get to Rome?", "I hate flying")]


@pytest.mark.slow
def test_retraining_the_shipped_recipe_reproduces_the_artifact(tmp_path):
    """~5 min on 2 cores: `epic-edge-lab train-embedder --check` does the same."""
    from epic_edge_lab.embedder_training import compare, train_shipped

    result = compare(train_shipped(tmp_path))
    assert result["reproduces"], result


def test_weights_are_unpacked_again_when_the_artifact_changes(tmp_path):
    """An older artifact's weights (another sha256 stamped beside them) are replaced."""
    import hashlib

    from epic_edge.export.minilm_onnx import embedder_weights

    folder = embedder_weights(tmp_path)
    stamp = folder / "artifact.sha256"
    assert stamp.read_text() == hashlib.sha256(ARTIFACT.read_bytes()).hexdigest()
    config = (folder / "config.json").read_bytes()
    (folder / "config.json").write_text("{}")
    assert embedder_weights(tmp_path) == folder  # the same stamp: left as it is
    assert (folder / "config.json").read_text() == "{}"
    stamp.write_text("an older artifact")
    embedder_weights(tmp_path)
    assert (folder / "config.json").read_bytes() == config


@pytest.mark.parametrize("command", ["train-embedder", "train-verifier"])
def test_the_artifact_trainers_refuse_a_missing_trained_folder_before_any_work(
        tmp_path, capsys, command):
    lab = pytest.importorskip("epic_edge_lab.cli")
    assert lab.main([command, "--from", str(tmp_path / "missing"), "--check"]) == 2
    err = capsys.readouterr().err
    assert "not a folder" in err and "missing" in err and "\n" not in err.strip()
    (tmp_path / "trained").mkdir()
    assert lab.main([command, "--from", str(tmp_path / "trained")]) == 2
    assert "--from wants --check or --pack" in capsys.readouterr().err
