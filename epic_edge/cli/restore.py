"""`epic-edge restore FILE`: import a memory export (JSONL) into a memory, merging."""

from __future__ import annotations

from pathlib import Path

from epic_edge.backup_file import read_export
from epic_edge.cli.common import add_memory_options, open_memory, parser, plural, print_json


def main(argv: list[str]) -> int:
    p = parser("restore", "Import a file written by `epic-edge backup` into a memory (a new "
                          "one, or merged into an existing one). The whole file is checked "
                          "before anything is written. Vectors are reused when the embedder "
                          "is the same; otherwise the instructions are embedded again.")
    p.add_argument("file", type=Path, help="the JSONL export to read")
    p.add_argument("--allow-forgotten", action="store_true",
                   help="restore items this memory or the export forgot (lifts their tombstones)")
    p.add_argument("--json", action="store_true", help="print the counts as JSON")
    add_memory_options(p)
    args = p.parse_args(argv)
    export = read_export(args.file)  # every value checked before a memory is opened
    with open_memory(args, creates=True) as memory:
        counts = memory.import_jsonl(export, args.allow_forgotten)
    if args.json:
        print_json(counts)
    else:
        print(f"imported {plural(counts['preferences'], 'new preference')}, "
              f"{plural(counts['items'], 'item')}, {plural(counts['entries'], 'entry')} "
              f"({counts['reembedded']} re-embedded, {counts['evicted']} evicted by the budget)")
        if counts["forgotten"] or counts["skipped_forgotten"]:
            print(f"kept {plural(counts['forgotten'], 'forgotten item')} forgotten; left out "
                  f"{plural(counts['skipped_forgotten'], 'item')} forgotten before "
                  "(--allow-forgotten restores them)")
        if counts["forgotten_not_carried"]:
            print(f"{plural(counts['forgotten_not_carried'], 'tombstone')} of forgotten items "
                  "did not carry over: the export was made under another key")
    return 0
