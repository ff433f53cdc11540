"""`epic-edge build`: memory files for many personas from one corpus, in one process or on Ray."""

from __future__ import annotations

from pathlib import Path

from epic_edge.cli.common import add_profile_options, parser


def main(argv: list[str]) -> int:
    p = parser("build", "Build a memory file per PrefWiki persona from one bench corpus: the "
                        "corpus is embedded once for all personas; with --engine ray the "
                        "embedding, verification and per-persona files run on a Ray cluster.")
    p.add_argument("--out", type=Path, required=True, help="folder for persona-<i>.epic files")
    p.add_argument("--corpus", default="sample",
                   help="bench corpus (default sample; device: every fetched source, mixed)")
    p.add_argument("--personas", default="0-1", help="all, 0-9 or 0,3,5 (default 0-1)")
    p.add_argument("--limit", type=int, default=None, help="first N chunks of the corpus only")
    p.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="local: one process (default); ray: a Ray cluster (extra `ray`)")
    p.add_argument("--address", default=None,
                   help="Ray cluster address (default: start a local one on this machine); "
                        "every node needs epic-edge and the model folder at the same path")
    p.add_argument("--workers", type=int, default=2,
                   help="Ray actors per stage: embedding and verification (default 2)")
    p.add_argument("--servers", default=None,
                   help="with --verifier llama-server: comma-separated OpenAI-compatible "
                        "server URLs (loopback, as that verifier requires), one per "
                        "verification worker in turn")
    p.add_argument("--verifier", default=None, help="verifier backend (default: the profile's)")
    p.add_argument("--instructions", choices=("template", "llm"), default="template",
                   help="who writes a learned verifier's instructions (default template)")
    p.add_argument("--tau", type=float, default=None, help="coarse-filter threshold (profile's)")
    p.add_argument("--json", type=Path, default=None, help="write the results as JSON here")
    add_profile_options(p)
    args = p.parse_args(argv)

    from epic_edge_lab import build, common

    result = build.run(args.out, corpus=args.corpus, personas=args.personas,
                       engine=args.engine, address=args.address, workers=args.workers,
                       verifier=args.verifier, instructions=args.instructions,
                       profile=args.profile, models=args.models, tau=args.tau,
                       servers=args.servers.split(",") if args.servers else None,
                       limit=args.limit)
    print(build.render(result))
    for row in result["per_persona"]:
        row.pop("entry_rows")  # corpus text stays in the memory files, never in results
    common.write_json(result, args.json)
    return 0
