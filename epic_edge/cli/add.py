"""`epic-edge add "TEXT"`: offer one item to a memory and say what became of it."""

from __future__ import annotations

from epic_edge.cli.common import add_memory_options, open_memory, parser, print_json
from epic_edge.remembering import Filed


def main(argv: list[str]) -> int:
    p = parser("add", "Offer one item to a memory: it is kept only where it bears on a "
                      "preference. Says whether it was kept (its item number and the "
                      "preference it is filed under) or where and why it was dropped. Adding "
                      "an item by hand stores it again even if `epic-edge forget` deleted it. "
                      "Exit status 1 when the verifier failed on it.")
    p.add_argument("text", help="the item's text, quoted")
    p.add_argument("--id", default="", help="the item's own id (an item that comes again "
                                            "under the same id with new text replaces it)")
    p.add_argument("--source", default="", help="where the item comes from (shown with it)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_memory_options(p)
    args = p.parse_args(argv)
    with open_memory(args) as memory:
        result = memory.remember({"text": args.text, "id": args.id, "source": args.source},
                                 allow_forgotten=True)
    if args.json:
        print_json(result.as_dict())
    else:
        for filed in result.items:
            print(describe(filed))
    return 1 if result.stats.failed else 0


def describe(filed: Filed) -> str:
    """One line: where the item was filed, or where and why it was dropped."""
    named = f" (id {filed.external_id})" if filed.external_id else ""
    if not filed.kept:
        why = filed.reason.removeprefix("dropped by the coarse filter: ")
        return f"dropped{named} ({filed.stage}): {why}"
    under = "; ".join(f"preference {p.id}: {p.text[:60]}" for p in filed.preferences)
    return f"kept as item {filed.item_id}{named} under {under} ({filed.reason})"
