"""`epic-edge-lab train-question-gate`: fit the question gate on labelled everyday questions."""

from __future__ import annotations

import json
from pathlib import Path

from epic_edge.cli.common import add_profile_options, parser
from epic_edge.profiles import load_profile
from epic_edge_lab import personal_data

DEFAULT_OUT = Path(__file__).resolve().parents[3] / "epic_edge" / "data" / "question-gate.json"


def main(argv: list[str]) -> int:
    p = parser("train-question-gate", "Fit the question gate (epic_edge.question_gate) on the "
                                      "personal set's dev personas' questions, the written "
                                      "gate set, the judged dev questions and the background "
                                      "questions, with the profile's embedder; print its "
                                      "cross-fitted figures and write it.")
    p.add_argument("--data", type=Path, default=None,
                   help="personal-stream set folder (default bench/personal/personas)")
    personal_data.add_personas_option(p, "11-20,31-40,61-70,81-90, the writers the embedder "
                                         "was not tuned on")
    p.add_argument("--gate-set", type=Path, default=None,
                   help="written gate set (default bench/personal/gate/questions.jsonl)")
    p.add_argument("--served", type=float, default=0.97,
                   help="share of preference questions the threshold still gives memory, "
                        "cross-fitted (default 0.97)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT,
                   help="where to write it (default epic_edge/data/question-gate.json)")
    p.add_argument("--check", action="store_true", help="fit and print only; write nothing")
    add_profile_options(p)
    args = p.parse_args(argv)
    from epic_edge import registry
    from epic_edge.models import model_dir
    from epic_edge_lab import gate_training

    gate_training.check_served(args.served)

    profile = load_profile(args.profile)
    personas = personal_data.load(args.data, "dev", args.personas)
    written = gate_training.gate_set(args.gate_set or gate_training.GATE_SET)
    embedder = registry.create("embedder", profile.embedder, args.models or model_dir())
    data = gate_training.questions(personas, written, gate_training.judged_dev())
    gate, report = gate_training.train(
        data, embedder.embed(data.text), args.served,
        f"{len(personas)} personal dev personas, {len(written)} written gate-set personas, "
        f"the judged dev questions and the background questions, {profile.name}")
    print(json.dumps({**report, "profile": profile.name}, indent=2))
    if not args.check:
        args.out.write_text(json.dumps(gate.to_dict()) + "\n", encoding="utf-8")
        print(f"written {args.out}")
    return 0
