"""`epic-edge-lab train-verifier`: retrain the shipped learned decision; pack it or check it."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from epic_edge.cli.common import parser


def main(argv: list[str]) -> int:
    p = parser("train-verifier", "Train the shipped learned decision (the recipe in "
                                 "bench/labels/learned_default.json, deterministic for its seed; "
                                 "~10 min on 2 cores) and check that it reproduces the committed "
                                 "artifact that `epic-edge setup` installs, or pack a new one.")
    p.add_argument("--out", type=Path, default=None,
                   help="folder to train into (default: a temporary one)")
    p.add_argument("--check", action="store_true",
                   help="compare with artifacts/epic-verifier-minilm.tar.xz (exit 1 if not the "
                        "same model.json and P(Keep) within 1e-6 on every labelled pair)")
    p.add_argument("--pack", type=Path, default=None,
                   help="write the trained model as a new artifact here (.tar.xz)")
    p.add_argument("--from", dest="trained", type=Path, default=None,
                   help="a folder trained already: check or pack it without training")
    args = p.parse_args(argv)
    from epic_edge_lab.verifier.artifact import check_artifact, pack
    from epic_edge_lab.verifier.train import train_shipped

    with tempfile.TemporaryDirectory(prefix="epic-train-") as tmp:
        folder = args.trained or args.out or Path(tmp)
        if args.trained is None:
            train_shipped(folder, progress=True)
        if args.pack:
            print(f"packed {pack(folder, args.pack)}")
        if args.check:
            result = check_artifact(folder)
            print(json.dumps(result, indent=1))
            return 0 if result["reproduces"] else 1
    return 0
