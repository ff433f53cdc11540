"""`epic-edge-lab train-embedder`: retrain the shipped embedder; pack it or check it."""

from __future__ import annotations

from epic_edge_lab.cli import trained_artifact


def main(argv: list[str]) -> int:
    from epic_edge_lab.embedder_training import FILES, compare, train_shipped
    from epic_edge_lab.verifier.artifact import pack

    return trained_artifact.main(
        argv, "train-embedder", "Fine-tune the shipped embedder (all-MiniLM-L6-v2 on four dev "
        "writers' personas and the written gate set; epic_edge_lab.embedder_training, "
        "deterministic for its seed; ~5 min on 2 cores) and check that it reproduces the "
        "committed artifact that `epic-edge setup` exports, or pack a new one.",
        "artifacts/epic-minilm.tar.xz",
        "the same manifest, and every weight within one fp16 step or every probe text's "
        "vector within 1e-5 of the artifact's",
        lambda folder: train_shipped(folder, progress=True), compare,
        lambda folder, out: pack(folder, out, FILES))
