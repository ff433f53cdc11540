"""`epic-edge bench latency`: the component breakdown on this machine; the lab adds the rest."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from epic_edge.cli.common import add_profile_options, parser


def main(argv: list[str]) -> int:
    if argv and not argv[0].startswith("-") and argv[0] != "latency":
        return _lab_bench(argv)
    p = parser("bench", "Benchmarks on this machine: `latency` here; quality, pool, judgments, "
                        "stream and report come with the lab (bench/, epic-edge-lab).")
    sub = p.add_subparsers(dest="bench", required=True)
    lat = sub.add_parser("latency", help="per-query and per-item component breakdown")
    lat.add_argument("--items", type=int, default=48, help="items ingested with the verifier")
    lat.add_argument("--runs", type=int, default=200, help="timed queries after warm-up")
    lat.add_argument("--verifier", default=None, help="verifier backend (profile's)")
    lat.add_argument("--embed-threads", type=int, default=None, help="override the profile's")
    lat.add_argument("--llm-threads", type=int, default=None, help="override the profile's")
    add_profile_options(lat)
    lat.add_argument("--json", type=Path, default=None,
                     help="write the results as JSON here (default: none)")
    args = p.parse_args(argv)

    from epic_edge import latency, measuring

    result = latency.run(profile=args.profile, models=args.models, verifier=args.verifier,
                         items=args.items, runs=args.runs, embed_threads=args.embed_threads,
                         llm_threads=args.llm_threads)
    print(latency.render(result))
    if args.json:
        measuring.write_json(result, args.json)
        print(f"- JSON: {args.json}")
    return 0


def _lab_bench(argv: list[str]) -> int:
    """`bench quality|pool|judgments|stream|report`: the lab's, when it is installed."""
    from epic_edge.cli import LAB_HINT, lab_commands

    lab = lab_commands().get("bench")
    if lab is None:
        print(f"epic-edge bench {argv[0]}: {LAB_HINT}", file=sys.stderr)
        return 2
    return int(importlib.import_module(lab[0]).main(argv) or 0)
