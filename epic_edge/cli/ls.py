"""`epic-edge ls`: list a memory's stored entries (item, preference, instruction), paged."""

from __future__ import annotations

from epic_edge.cli.common import add_memory_options, open_memory, parser, print_json


def main(argv: list[str]) -> int:
    p = parser("ls", "List the entries a memory holds, oldest first: the item (its number, "
                     "which `epic-edge forget` takes, and the id it was ingested with), the "
                     "preference it was kept for, the instruction and the confidence.")
    p.add_argument("--offset", type=int, default=0, help="entries to skip (0)")
    p.add_argument("--limit", type=int, default=50, help="entries to show (50, at most 1000)")
    p.add_argument("--preference", default=None, help="only this preference's (id or text)")
    p.add_argument("--json", action="store_true", help="print as JSON")
    add_memory_options(p)
    args = p.parse_args(argv)
    pref = args.preference
    if pref is not None and pref.isdecimal():
        pref = int(pref)
    with open_memory(args, read_only=True) as memory:
        entries = memory.entries(args.offset, args.limit, pref)
        total = memory.info()["entries"]
    if args.json:
        print_json({"offset": args.offset, "total": total,
                    "entries": [e.as_dict() for e in entries]})
        return 0
    for e in entries:
        named = f" (id {e.external_id})" if e.external_id else ""
        text = e.item_text if len(e.item_text) <= 100 else e.item_text[:100] + "..."
        print(f"item {e.item_id}{named}  [{e.confidence:.2f}]  preference {e.preference.id}: "
              f"{e.preference.text[:60]}")
        print(f"    {text}")
        print(f"    instruction: {e.instruction[:160]}")
    shown = f"{args.offset + 1}-{args.offset + len(entries)}" if entries else "none"
    print(f"entries {shown} of {total}")
    return 0
