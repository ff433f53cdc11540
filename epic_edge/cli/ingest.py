"""`epic-edge ingest FILE`: run a file of items through the EPIC pipeline into a memory."""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path

from tqdm import tqdm

from epic_edge.cli.common import add_memory_options, open_memory, parser, print_json
from epic_edge.datasets import read_items, read_lines
from epic_edge.errors import InvalidInputError
from epic_edge.types import BatchStats


def main(argv: list[str]) -> int:
    p = parser("ingest", "Ingest items from a JSONL file (objects with 'text', optional "
                         "'source' and 'id') or a text file (one item per line), or from "
                         "standard input (-). Items `epic-edge forget` deleted are skipped "
                         "unless --allow-forgotten. Exit status "
                         "1 when the verifier failed on some items: they are not recorded as "
                         "judged, so running the same ingest again judges them.")
    p.add_argument("file", help="items file (.jsonl/.ndjson, or text), or - for standard input")
    p.add_argument("--format", choices=["auto", "jsonl", "text"], default="auto",
                   help="how to read the lines (auto: by the file's extension; for standard "
                        "input, JSON Lines when the first line starts with '{')")
    p.add_argument("--allow-forgotten", action="store_true",
                   help="store again items `epic-edge forget` deleted (skipped otherwise)")
    p.add_argument("--batch-size", type=int, default=32, help="items per transaction (32)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the totals as JSON (no bar)")
    add_memory_options(p)
    args = p.parse_args(argv)
    if args.file == "-":
        items = read_lines(sys.stdin.buffer, "standard input", "stdin", args.format)
    elif not Path(args.file).is_file():
        raise InvalidInputError(f"{args.file} does not exist or is not a file")
    else:
        items = read_items(args.file, args.format)
    total = BatchStats()
    bar = None
    try:
        with open_memory(args, creates=True) as memory:
            for stats in memory.ingest_batches(items, args.batch_size,
                                               allow_forgotten=args.allow_forgotten):
                if bar is None:  # after the first batch: an early error prints no bar
                    bar = tqdm(desc="ingest", unit="item", disable=args.quiet or args.json)
                total.merge(stats)
                bar.update(stats.seen)
                bar.set_postfix(kept=total.kept, llm_calls=total.llm_calls)
    finally:
        if bar is not None:
            bar.close()
    if args.json:
        print_json(asdict(total))
    else:
        print(format_totals(total))
    if total.failed:
        print(f"epic-edge ingest: the verifier failed on {total.failed} items (see the warnings); "
              "they are not recorded as judged: run the same ingest again once it works",
              file=sys.stderr)
        return 1
    return 0


def format_totals(total: BatchStats) -> str:
    secs = ", ".join(f"{k} {v:.2f}s" for k, v in total.seconds.items())
    return (f"seen {total.seen}, already judged {total.duplicates}, rejected {total.rejected}, "
            + (f"forgotten {total.forgotten}, " if total.forgotten else "")
            + f"passed filter {total.passed_filter}, verified {total.verified}, kept {total.kept}, "
            f"entries added {total.entries_added}, LLM calls {total.llm_calls}"
            + (f", failed {total.failed}" if total.failed else "") + "\n"
            f"time: {secs}")
