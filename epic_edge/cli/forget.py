"""`epic-edge forget ID`: delete one item and its entries from a memory."""

from __future__ import annotations

from epic_edge.cli.common import add_memory_options, open_memory, parser, plural, print_json
from epic_edge.errors import InvalidInputError


def main(argv: list[str]) -> int:
    p = parser("forget", "Delete one item and every entry kept for it; no copy of its text "
                         "stays in the file, only its 16-byte content hash (keyed when the "
                         "memory is encrypted), so ingesting it again stores nothing unless "
                         "`ingest --allow-forgotten` or `epic-edge add`. ID is the id the item "
                         "was ingested with (its chunks too), or with --number the item number "
                         "`epic-edge ls` and `query` show.")
    p.add_argument("id", help="the item's id (or its number, with --number)")
    p.add_argument("--number", action="store_true", help="ID is the item number from `ls`")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_memory_options(p)
    args = p.parse_args(argv)
    item: int | str = args.id
    if args.number:
        if not args.id.isdecimal():
            p.error("with --number, ID must be a number (see `epic-edge ls`)")
        item = int(args.id)
    with open_memory(args) as memory:
        try:
            removed = memory.forget(item)
        except InvalidInputError as exc:
            if args.number or not args.id.isdecimal():
                raise
            raise InvalidInputError(f"{exc}; to forget item number {args.id} from `epic-edge "
                                    f"ls`, run `epic-edge forget {args.id} --number`") from exc
    if args.json:
        print_json({"item": item, "removed_entries": removed})
    else:
        print(f"forgot item {item!r} and {plural(removed, 'entry')}")
    return 0
