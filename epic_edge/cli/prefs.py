"""`epic-edge prefs add|rm|ls`: manage the preferences of a memory."""

from __future__ import annotations

from dataclasses import asdict

from epic_edge.cli.common import add_memory_options, open_memory, parser, plural, print_json


def main(argv: list[str]) -> int:
    p = parser("prefs", "Add, remove or list the stated preferences of a memory.")
    sub = p.add_subparsers(dest="action", required=True)
    add = sub.add_parser("add", help="add one or more preferences")
    add.add_argument("texts", nargs="+", help="preference text(s), quoted")
    rm = sub.add_parser("rm", help="remove a preference (by id or exact text) and its entries")
    rm.add_argument("preference", help="preference id (see `prefs ls`) or exact text")
    sub.add_parser("ls", help="list preferences with their ids")
    for sp in sub.choices.values():
        add_memory_options(sp)
        sp.add_argument("--json", action="store_true", help="print as JSON")
    args = p.parse_args(argv)
    action = args.action
    with open_memory(args, read_only=action == "ls", creates=action == "add") as memory:
        if args.action == "rm":
            key = int(args.preference) if args.preference.isdecimal() else args.preference
            removed = memory.remove_preference(key)
            if args.json:
                print_json({"preference": key, "removed_entries": removed})
            else:
                print(f"removed preference {args.preference!r} and {plural(removed, 'entry')}")
            return 0
        prefs = (memory.add_preferences(args.texts) if args.action == "add"
                 else memory.preferences())
    if args.json:
        print_json([asdict(pref) for pref in prefs])
        return 0
    for pref in prefs:
        print(f"{pref.id}\t{pref.text}")
    return 0
