"""`epic-edge calibrate`: pick the coarse-filter tau of an embedder from the labelled set."""

from __future__ import annotations

import json
from pathlib import Path

from epic_edge.cli.common import add_profile_options, parser
from epic_edge.errors import InvalidInputError
from epic_edge.profiles import load_profile
from epic_edge_lab.calibrate import DEFAULT_TARGET_RECALL, calibrate_tau, load_verification_set


def main(argv: list[str]) -> int:
    p = parser("calibrate", "Pick tau for the profile's embedder so that a target share of the "
                            "labelled Keep pairs pass the coarse filter; write it into a copy of "
                            "the profile (.toml) or a bundle manifest (.json).")
    p.add_argument("--target-recall", type=float, default=DEFAULT_TARGET_RECALL,
                   help=f"share of Keep pairs that must pass (default {DEFAULT_TARGET_RECALL})")
    p.add_argument("--split", default="train", choices=["train", "test", "all"],
                   help="labelled split to calibrate on (default train; test stays held out)")
    p.add_argument("--labels", type=Path, default=None,
                   help="a labelled JSONL file instead of the shipped set")
    p.add_argument("--out", type=Path, default=None,
                   help="write the calibrated profile copy (.toml) or manifest (.json) here")
    p.add_argument("--manifest", type=Path, default=None,
                   help="bundle manifest JSON to copy into --out (default: the profile TOML)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_profile_options(p)
    args = p.parse_args(argv)
    if not 0.0 < args.target_recall <= 1.0:
        raise InvalidInputError("--target-recall must be in (0, 1]")
    from epic_edge import registry
    from epic_edge.models import model_dir

    profile = load_profile(args.profile)
    pairs = load_verification_set(args.split, args.labels)
    embedder = registry.create("embedder", profile.embedder, args.models or model_dir())
    result = calibrate_tau(embedder, pairs, args.target_recall, split=args.split)
    info = {**result.as_dict(), "profile": profile.name, "profile_tau": profile.embedder.get("tau")}
    if args.out:
        from epic_edge_lab.calibrate import write_tau

        source = args.manifest or profile.path
        if source is None:
            raise InvalidInputError("the profile has no file to copy; pass --manifest")
        if args.out.suffix not in (".toml", ".json"):
            raise InvalidInputError("--out must end in .toml (profile) or .json (manifest)")
        info["written"] = str(write_tau(source, args.out, result))
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"embedder   {result.embedder}")
    print(f"pairs      {result.keep_pairs} Keep, {result.discard_pairs} Discard ({args.split})")
    print(f"tau        {result.tau:.4f}  (profile {profile.name}: {info['profile_tau']})")
    print(f"Keep pass  {result.recall:.3f}  (target {result.target_recall})")
    print(f"Discard pass {result.pass_rate_discard:.3f}")
    if "written" in info:
        print(f"written    {info['written']}")
    return 0
