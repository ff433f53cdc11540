"""`epic-edge-lab train-verifier`: retrain the shipped learned decision; pack it or check it."""

from __future__ import annotations

from epic_edge_lab.cli import trained_artifact


def main(argv: list[str]) -> int:
    from epic_edge_lab.verifier.artifact import TOLERANCE, check_artifact, pack
    from epic_edge_lab.verifier.train import train_shipped

    return trained_artifact.main(
        argv, "train-verifier", "Train the shipped learned decision (the recipe in "
        "bench/labels/learned_default.json, deterministic for its seed; ~10 min on 2 cores) and "
        "check that it reproduces the committed artifact that `epic-edge setup` installs, or "
        "pack a new one.", "artifacts/epic-verifier-minilm.tar.xz",
        f"the same model.json and P(Keep) within {TOLERANCE:g} on every labelled pair",
        lambda folder: train_shipped(folder, progress=True), check_artifact, pack)
