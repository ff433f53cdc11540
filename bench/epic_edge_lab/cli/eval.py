"""`epic-edge eval judge --endpoint URL`: PrefEval-style judged answers from retrieved context."""

from __future__ import annotations

import json
from pathlib import Path

from epic_edge.cli.common import add_profile_options, parser


def main(argv: list[str]) -> int:
    p = parser("eval", "Judged evaluation against an OpenAI-compatible endpoint (vLLM, "
                       "llama.cpp server, ...): answer each question from the retrieved "
                       "context, then four checks (acknowledgement, violation, hallucination, "
                       "helpfulness); accuracy = no error. Item text goes to that endpoint only.")
    sub = p.add_subparsers(dest="action", required=True)
    j = sub.add_parser("judge", help="run the judged evaluation")
    j.add_argument("--endpoint", required=True, help="base URL, e.g. http://127.0.0.1:8080")
    j.add_argument("--judge-endpoint", default=None, help="a separate judge (default: same)")
    j.add_argument("--model", default="local", help="model name sent to the endpoint")
    j.add_argument("--dataset", choices=("prefeval", "prefwiki"), default="prefeval")
    j.add_argument("--corpus", choices=("wiki", "chat", "sample"), default=None)
    j.add_argument("--limit", type=int, default=None, help="first N corpus chunks")
    j.add_argument("--personas", default="0", help="all, 0-9 or 0,3,5 (default 0)")
    j.add_argument("--questions", type=int, default=None, help="questions per persona")
    j.add_argument("--systems", default="epic", help="comma list of epic,store-everything,none")
    j.add_argument("--verifier", default="template")
    j.add_argument("-k", type=int, default=5)
    j.add_argument("--timeout", type=float, default=120.0, help="seconds per request")
    j.add_argument("--max-tokens", type=int, default=256)
    j.add_argument("--json", type=Path, default=None)
    add_profile_options(j)
    args = p.parse_args(argv)

    from epic_edge_lab import judge

    result = judge.run(args.endpoint, dataset=args.dataset, corpus=args.corpus,
                       personas=args.personas, systems=tuple(args.systems.split(",")),
                       questions_per_persona=args.questions, limit=args.limit,
                       verifier=args.verifier, profile=args.profile, models=args.models,
                       k=args.k, model=args.model, timeout=args.timeout,
                       max_tokens=args.max_tokens, judge_endpoint=args.judge_endpoint)
    print(judge.render(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1, default=float) + "\n")
        print(f"- JSON: {args.json}")
    return 0
