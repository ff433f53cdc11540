"""`epic-edge bench quality|pool|judgments|stream|personal|report`: the lab's benches."""

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


def _engine_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="local: one process (default); ray: embedding and verification on a "
                        "Ray cluster, same figures (extra `ray`)")
    p.add_argument("--address", default=None, help="Ray cluster address (default: a local one)")
    p.add_argument("--workers", type=int, default=2, help="Ray actors per stage (default 2)")


def _judged_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--split", choices=("dev", "test", "all"), default="all",
                   help="judged questions to use: dev (tuning), test, or all (default)")
    p.add_argument("--corpus", default="device",
                   help="bench corpus (default device: every fetched source, mixed)")
    p.add_argument("--no-variants", action="store_true",
                   help="the five systems only, not the retrieval variants (quality: "
                        "rank; pool --from: pool their hits only)")
    _judged_set_option(p)


def _judged_set_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--judged", type=Path, default=None,
                   help="judged set folder: questions.jsonl, judgments.jsonl, passages.jsonl "
                        "and, for personas other than PrefWiki's, personas.json (default: the "
                        "PrefWiki and PrefEval set in bench/judged/)")


def main(argv: list[str]) -> int:
    p = parser("bench", "Run the EPIC benchmarks on this machine; print a table, write JSON.")
    sub = p.add_subparsers(dest="bench", required=True)
    qual = sub.add_parser("quality", help="judged P@5 (aligned, answers, both), nDCG@5, bytes "
                                          "and ms of every system on the judged question set")
    _judged_options(qual)
    _quality_options(qual)
    _engine_options(qual)
    _common(qual)
    pool = sub.add_parser("pool", help="rank the judged questions with every system and write "
                                       "the unjudged hits as blind reader batches")
    _judged_options(pool)
    _quality_options(pool)
    pool.add_argument("--out", type=Path, default=Path("judging"),
                      help="folder for the reader batches (default ./judging)")
    pool.add_argument("--from", dest="saved", type=Path, default=None,
                      help="pool a saved `bench quality --json` run instead of running the "
                           "bench (its passages are read back from the cached corpus; the run "
                           "options and --json do not apply)")
    _common(pool)
    judged = sub.add_parser("judgments", help="add a reader's judgments; print agreement")
    judged.add_argument("file", type=Path, nargs="?", help="JSONL of {qid, pid, answers, "
                                                           "aligned} from one reader")
    judged.add_argument("--judge", default="", help="the reader's name (required with FILE)")
    _judged_set_option(judged)
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
                    help="EPIC memory budget in bytes (default: the profile's)")
    st.add_argument("--max-entries", type=int, default=None,
                    help="EPIC entry budget (default: the profile's)")
    _engine_options(st)
    _common(st)
    per = sub.add_parser("personal", help="a fresh memory per persona over its own labelled "
                                          "stream: keep recall and precision, answer recall "
                                          "beside store-everything and equal-size buffers, gate")
    per.add_argument("--data", type=Path, default=None,
                     help="folder of persona files p01.json .. pNN.json (default: the set "
                          "in bench/personal/personas/)")
    per.add_argument("--split", choices=("dev", "test", "all"), default="dev",
                     help="personas: dev (odd numbers, default), test (even) or all")
    per.add_argument("--budgets", default="profile",
                     help="comma-separated byte budgets, each a run of its own: bytes (68000, "
                          "64KB, 0.4MB; a new memory's pages take about 61 KB before its first "
                          "entry), profile (the profile's own, default) or none")
    per.add_argument("--batch", type=int, default=8, help="items per ingest batch (default 8)")
    per.add_argument("--seed", type=int, default=0, help="seed of the random sample (default 0)")
    _common(per)
    rep = sub.add_parser("report", help="run latency, quality and stream; write BENCHMARKS.md")
    rep.add_argument("--out", type=Path, default=Path("bench/results"))
    rep.add_argument("--markdown", type=Path, default=Path("BENCHMARKS.md"))
    rep.add_argument("--reuse", action="store_true",
                     help="reuse JSON files already in --out (quality.json is rescored with "
                          "today's judgments and written back)")
    _quality_options(rep)
    add_profile_options(rep)
    args = p.parse_args(argv)

    from epic_edge_lab import (
        common,
        personal,
        personal_report,
        pooling,
        quality,
        report,
        stream,
    )

    if args.bench == "judgments":
        return _judgments(args)
    if args.bench == "pool":
        if args.saved and args.json:
            p.error(f"--json has no effect with --from: the run is saved already ({args.saved})")
        if args.saved:
            result = pooling.saved_run(args.saved, variants=not args.no_variants)
        else:
            result = quality.run(
                args.split, corpus=args.corpus, personas=args.personas, verifier=args.verifier,
                instructions=args.instructions, profile=args.profile, models=args.models,
                tau=args.tau, variants=not args.no_variants, judged_root=args.judged)
        done = pooling.pool(result, args.out, root=args.judged)
        result.pop("passages")  # corpus text stays in the corpora, never in results
        common.write_json(result, args.json)
        print(f"{done['rows']} unjudged (question, passage) rows over {done['questions']} "
              f"questions in {len(done['batches'])} batches under {args.out}/")
        return 0
    if args.bench == "report":
        results = report.run_all(args.out, personas=args.personas, verifier=args.verifier,
                                 instructions=args.instructions, profile=args.profile,
                                 reuse=args.reuse)
        args.markdown.write_text(report.markdown(results, args.out), encoding="utf-8")
        print(f"wrote {args.markdown} and {args.out}/")
        return 0
    if args.bench == "personal":
        result = personal.run(args.data, args.split, budgets=args.budgets, profile=args.profile,
                              models=args.models, batch=args.batch, seed=args.seed)
        text = personal_report.render(result)
    elif args.bench == "quality":
        result = quality.run(args.split, corpus=args.corpus, personas=args.personas,
                             verifier=args.verifier, instructions=args.instructions,
                             profile=args.profile, models=args.models, tau=args.tau,
                             variants=not args.no_variants, engine=args.engine,
                             address=args.address, workers=args.workers,
                             judged_root=args.judged)
        text = quality.render(result)
        result.pop("passages")  # corpus text stays in the corpora, never in results
    else:
        result = stream.run(persona=args.persona, items=args.items, batches=args.batches,
                            drift=args.drift, seed=args.seed, corpus=args.corpus,
                            verifier=args.verifier, instructions=args.instructions,
                            profile=args.profile, models=args.models, plot=args.plot,
                            max_bytes=args.max_bytes, max_entries=args.max_entries,
                            engine=args.engine, address=args.address, workers=args.workers)
        text = stream.render(result) + f"\n- plot: {args.plot}"
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1, default=float) + "\n")
        print(f"- JSON: {args.json}")
    return 0


def _judgments(args: argparse.Namespace) -> int:
    from epic_edge_lab import pooling, relevance
    from epic_edge_lab.judged_metrics import agreement

    if args.file is not None:
        added = pooling.add_judgments(args.file, args.judge, args.judged)
        print(f"added {added} judgments by {args.judge}")
    judgments = relevance.load_judgments(args.judged)
    agree = agreement(judgments)
    print(f"{len(judgments)} judgments on {len({(j.qid, j.pid) for j in judgments})} "
          f"(question, passage) pairs; {agree['double_judged']} judged twice")
    for axis in relevance.AXES:
        cell = agree[axis]
        if cell:
            print(f"  {axis}: Cohen's kappa {cell['kappa']:.3f}, agreement {cell['agreement']:.3f}")
    return 0
