"""`epic-edge query "QUESTION"`: show retrieved entries, or the context block for an LLM."""

from __future__ import annotations

import sys
from dataclasses import asdict

from epic_edge.cli.common import add_memory_options, open_memory, parser, print_json
from epic_edge.limits import MAX_QUESTION_CHARS, clean_text


def main(argv: list[str]) -> int:
    p = parser("query", "Retrieve the memory entries that bear on a question. Each hit shows "
                        "the score it was ranked by (its vector similarity plus the profile's "
                        "ranking evidence) and its item number and id (what `forget` takes).")
    p.add_argument("question", help="the question, quoted")
    p.add_argument("-k", type=int, default=None,
                   help="entries to return, 1 to 1000 (profile default: 5)")
    p.add_argument("--no-steer", action="store_true", help="search with the raw query")
    p.add_argument("--context", action="store_true",
                   help="print the prompt block for an LLM (nothing when memory stays out)")
    p.add_argument("--regime", choices=["conservative", "ordinary", "aggressive"],
                   default="conservative", help="with --context: how eagerly memory enters "
                                                "(aggressive: no gate)")
    p.add_argument("--no-gate", action="store_true",
                   help="retrieve even when the question is far from every preference "
                        "(with --context, use --regime aggressive)")
    p.add_argument("--json", action="store_true", help="print hits (or the context) as JSON")
    add_memory_options(p)
    args = p.parse_args(argv)
    if args.context and (args.no_gate or args.no_steer):
        p.error("--no-gate and --no-steer apply to hits; with --context choose a --regime "
                "(aggressive has no gate)")
    clean_text(args.question, "question", MAX_QUESTION_CHARS)  # bad input: before any file
    with open_memory(args, read_only=True) as memory:
        if args.context:
            block = memory.context(args.question, args.k, regime=args.regime)
            if args.json:
                print_json({"question": args.question, "regime": args.regime,
                            "used_memory": bool(block), "context": block})
            elif block:
                print(block, end="")
            else:
                print("(no memory bears on this question)", file=sys.stderr)
            return 0
        found = memory.lookup(args.question, args.k, steer=not args.no_steer,
                              gate=-1.0 if args.no_gate else None)
        hits = found.hits
    if args.json:
        print_json([asdict(h) for h in hits])
        return 0
    if not hits:
        print(f"(no memory: {found.reason})", file=sys.stderr)
    for n, hit in enumerate(hits, 1):
        named = f", id {hit.external_id}" if hit.external_id else ""
        print(f"{n}. [{hit.score:.3f}] item {hit.item_id}{named}; preference: "
              f"{hit.preference.text}")
        print(f"   instruction: {hit.instruction}")
        print(f"   item: {hit.item_text[:200]}{'...' if len(hit.item_text) > 200 else ''}")
    return 0
