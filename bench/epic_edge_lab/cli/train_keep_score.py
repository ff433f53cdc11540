"""`epic-edge-lab train-keep-score`: fit the keep score on the personal set's dev personas."""

from __future__ import annotations

import json
from pathlib import Path

from epic_edge.cli.common import add_profile_options, parser
from epic_edge.errors import InvalidInputError
from epic_edge.profiles import load_profile
from epic_edge_lab import personal_data

DEFAULT_OUT = Path(__file__).resolve().parents[3] / "epic_edge" / "data" / "keep-score.json"


def main(argv: list[str]) -> int:
    p = parser("train-keep-score", "Fit the keep score (epic_edge.keep_score) on every item x "
                                   "preference pair of the personal set's dev personas, with "
                                   "the profile's embedder and decision; print its cross-fitted "
                                   "figures and write it.")
    p.add_argument("--data", type=Path, default=None,
                   help="personal-stream set folder (default bench/personal/personas)")
    personal_data.add_personas_option(p, "11-20,31-40,61-70,81-90, the writers the embedder "
                                         "was not tuned on")
    p.add_argument("--recall", type=float, default=0.85,
                   help="item keep recall the threshold aims at, cross-fitted (default 0.85)")
    p.add_argument("--tau", type=float, default=None,
                   help="coarse-filter tau the threshold is chosen under (default the "
                        "profile's)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT,
                   help="where to write it (default epic_edge/data/keep-score.json)")
    p.add_argument("--check", action="store_true",
                   help="fit and print only; write nothing")
    add_profile_options(p)
    args = p.parse_args(argv)
    if not 0.0 < args.recall < 1.0:
        raise InvalidInputError("--recall must be in (0, 1)")
    from epic_edge import registry
    from epic_edge.models import model_dir
    from epic_edge_lab import keep_training

    profile = load_profile(args.profile)
    models = args.models or model_dir()
    tau = float(args.tau if args.tau is not None else profile.embedder["tau"])
    personas = personal_data.load(args.data, "dev", args.personas)
    embedder = registry.create("embedder", profile.embedder, models)
    verifier = registry.create("verifier", {**profile.verifier, "keep_score": None}, models)
    data = keep_training.pairs(personas, embedder, verifier)
    score, report = keep_training.train(
        data, tau, args.recall, f"{len(personas)} personal dev personas, {profile.name}")
    print(json.dumps({**report, "tau": tau, "profile": profile.name}, indent=2))
    if not args.check:
        args.out.write_text(json.dumps(score.to_dict()) + "\n", encoding="utf-8")
        print(f"written {args.out}")
    return 0
