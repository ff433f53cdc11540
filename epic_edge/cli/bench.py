"""`epic-edge bench latency|quality|stream|report`: the EPIC benchmarks, JSON and tables."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from epic_edge.cli.common import add_profile_options, parser


def _common(p: argparse.ArgumentParser, json_default: str | None = None) -> None:
    add_profile_options(p)
    p.add_argument("--json", type=Path, default=Path(json_default) if json_default else None,
                   help=f"write the results as JSON here (default: {json_default or 'none'})")


def _quality_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--personas", default="all", help="all, 0-9 or 0,3,5 (default all)")
    p.add_argument("--verifier", default=None,
                   help="fine-verification backend (default: the profile's; linux-cpu: learned); "
                        "template = no decision model, llama-cpp = the LLM decides")
    p.add_argument("--instructions", choices=("template", "llm"), default="template",
                   help="who writes a learned verifier's instructions (default: template; an "
                        "LLM call per kept item does not fit 57 personas in two hours)")
    p.add_argument("--tau", type=float, default=None, help="coarse-filter threshold (profile's)")


def main(argv: list[str]) -> int:
    p = parser("bench", "Run the EPIC benchmarks on this machine; print a table, write JSON.")
    sub = p.add_subparsers(dest="bench", required=True)
    lat = sub.add_parser("latency", help="per-query and per-item component breakdown")
    lat.add_argument("--items", type=int, default=48, help="items ingested with the verifier")
    lat.add_argument("--runs", type=int, default=200, help="timed queries after warm-up")
    lat.add_argument("--verifier", default=None, help="verifier backend (profile's)")
    lat.add_argument("--embed-threads", type=int, default=None, help="override the profile's")
    lat.add_argument("--llm-threads", type=int, default=None, help="override the profile's")
    _common(lat)
    qual = sub.add_parser("quality", help="PAP@5 etc. for five systems over the personas")
    qual.add_argument("--dataset", choices=("prefwiki", "prefeval"), default="prefwiki")
    qual.add_argument("--corpus", choices=("wiki", "chat", "sample"), default=None,
                      help="corpus (wiki for prefwiki, chat for prefeval)")
    qual.add_argument("--limit", type=int, default=None, help="use the first N corpus chunks")
    _quality_options(qual)
    _common(qual)
    st = sub.add_parser("stream", help="streaming with preference drift; PNG plot")
    st.add_argument("--persona", type=int, default=0)
    st.add_argument("--items", type=int, default=12000,
                    help="chunks streamed (default 12000: the whole wiki corpus)")
    st.add_argument("--batches", type=int, default=24)
    st.add_argument("--drift", type=float, default=0.3, help="chance of a change per step")
    st.add_argument("--seed", type=int, default=0)
    st.add_argument("--corpus", choices=("wiki", "chat", "sample"), default=None)
    st.add_argument("--verifier", default=None, help="verifier backend (profile's)")
    st.add_argument("--instructions", choices=("template", "llm"), default="template",
                    help="who writes a learned verifier's instructions")
    st.add_argument("--plot", type=Path, default=Path("bench/results/stream.png"))
    st.add_argument("--max-bytes", type=int, default=None,
                    help="EPIC memory budget in bytes (evicts lowest confidence; default none)")
    st.add_argument("--max-entries", type=int, default=None, help="EPIC entry budget")
    _common(st)
    rep = sub.add_parser("report", help="run latency, quality and stream; write BENCHMARKS.md")
    rep.add_argument("--out", type=Path, default=Path("bench/results"))
    rep.add_argument("--markdown", type=Path, default=Path("BENCHMARKS.md"))
    rep.add_argument("--reuse", action="store_true", help="reuse JSON files already in --out")
    _quality_options(rep)
    add_profile_options(rep)
    args = p.parse_args(argv)

    from epic_edge.bench import latency, quality, report, stream

    if args.bench == "report":
        results = report.run_all(args.out, personas=args.personas, verifier=args.verifier,
                                 instructions=args.instructions, profile=args.profile,
                                 reuse=args.reuse)
        args.markdown.write_text(report.markdown(results, args.out), encoding="utf-8")
        print(f"wrote {args.markdown} and {args.out}/")
        return 0
    if args.bench == "latency":
        result = latency.run(profile=args.profile, models=args.models, verifier=args.verifier,
                             items=args.items, runs=args.runs, embed_threads=args.embed_threads,
                             llm_threads=args.llm_threads)
        text = latency.render(result)
    elif args.bench == "quality":
        result = quality.run(args.dataset, corpus=args.corpus, personas=args.personas,
                             verifier=args.verifier, instructions=args.instructions,
                             profile=args.profile, models=args.models, limit=args.limit,
                             tau=args.tau)
        text = quality.render(result)
    else:
        result = stream.run(persona=args.persona, items=args.items, batches=args.batches,
                            drift=args.drift, seed=args.seed, corpus=args.corpus,
                            verifier=args.verifier, instructions=args.instructions,
                            profile=args.profile, models=args.models, plot=args.plot,
                            max_bytes=args.max_bytes, max_entries=args.max_entries)
        text = stream.render(result) + f"\n- plot: {args.plot}"
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1, default=float) + "\n")
        print(f"- JSON: {args.json}")
    return 0
