"""`epic-edge explain TEXT`: why a text would (not) be kept now, stage by stage."""

from __future__ import annotations

from epic_edge.cli.common import add_memory_options, open_memory, parser, print_json


def main(argv: list[str]) -> int:
    p = parser("explain", "Run the coarse filter and the verifier on a text without storing "
                          "it: similarity to each preference against tau, the verifier's "
                          "P(Keep) and threshold, what would be kept and why (not).")
    p.add_argument("text", help="the item's text, quoted")
    p.add_argument("--json", action="store_true", help="print as JSON")
    add_memory_options(p)
    args = p.parse_args(argv)
    with open_memory(args, read_only=True) as memory:
        found = memory.explain(args.text)
    if args.json:
        print_json(found.as_dict())
        return 0
    print(f"tau {found.tau:.3f} (coarse filter)")
    for row in found.similarities:
        mark = "passes" if row["passes"] else "below "
        print(f"  {row['similarity']:+.3f} {mark} preference {row['id']}: {row['text'][:70]}")
    if found.verdict is not None:
        p_keep = "n/a" if found.p_keep is None else f"{found.p_keep:.3f}"
        threshold = "n/a" if found.threshold is None else f"{found.threshold:.3f}"
        print(f"verifier: {'keep' if found.verdict['keep'] else 'discard'}, P(Keep) {p_keep}, "
              f"threshold {threshold}")
        for pid, text in found.verdict["instructions"].items():
            print(f"  instruction for preference {pid}: {text[:160]}")
    stored = ", ".join(map(str, found.stored_under)) or "none"
    print(f"stored now under preference(s): {stored}")
    print(f"why: {found.why}")
    return 0
