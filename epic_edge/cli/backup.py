"""`epic-edge backup FILE`: export a whole memory (preferences, items, entries) as JSONL."""

from __future__ import annotations

from pathlib import Path

from epic_edge.cli.common import add_memory_options, open_memory, parser, plural, print_json
from epic_edge.errors import InvalidInputError


def main(argv: list[str]) -> int:
    p = parser("backup", "Export a whole memory to a JSONL file: preferences, items, entries "
                         "with their instructions, confidences, times and vectors. The file "
                         "holds the text in clear (an encrypted memory needs its key to export) "
                         "and is created readable by you only. `epic-edge restore` reads it.")
    p.add_argument("file", type=Path, help="the JSONL file to write")
    p.add_argument("--force", action="store_true", help="replace an existing file")
    p.add_argument("--json", action="store_true", help="print the counts as JSON")
    add_memory_options(p)
    args = p.parse_args(argv)
    if args.file.exists() and not args.force:
        raise InvalidInputError(f"{args.file} exists; pass --force to replace it")
    with open_memory(args, read_only=True) as memory:
        counts = memory.export_jsonl(args.file)
    if args.json:
        print_json({"file": str(args.file), **counts})
    else:
        print(f"wrote {args.file}: {plural(counts['preferences'], 'preference')}, "
              f"{plural(counts['items'], 'item')}, {plural(counts['entries'], 'entry')}, "
              f"{plural(counts['forgotten'], 'forgotten item')} (kept forgotten on restore)")
    return 0
