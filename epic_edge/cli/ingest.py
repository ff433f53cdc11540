"""`epic-edge ingest FILE`: run a file of items through the EPIC pipeline into a memory."""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path

from tqdm import tqdm

from epic_edge.cli.common import add_memory_options, open_memory, parser, print_json
from epic_edge.datasets import read_items
from epic_edge.errors import InvalidInputError
from epic_edge.types import BatchStats


def main(argv: list[str]) -> int:
    p = parser("ingest", "Ingest items from a JSONL file (objects with 'text', optional "
                         "'source' and 'id') or a text file (one item per line). Exit status "
                         "1 when the verifier failed on some items: they are not recorded as "
                         "judged, so running the same ingest again judges them.")
    p.add_argument("file", type=Path, help="items file (.jsonl/.ndjson, or text)")
    p.add_argument("--batch-size", type=int, default=32, help="items per transaction (32)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the totals as JSON (no bar)")
    add_memory_options(p)
    args = p.parse_args(argv)
    if not args.file.is_file():
        raise InvalidInputError(f"{args.file} does not exist or is not a file")
    total = BatchStats()
    bar = None
    try:
        with open_memory(args, creates=True) as memory:
            for stats in memory.ingest_batches(read_items(args.file), args.batch_size):
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
    return (f"seen {total.seen}, duplicates {total.duplicates}, rejected {total.rejected}, "
            f"passed filter {total.passed_filter}, verified {total.verified}, kept {total.kept}, "
            f"entries added {total.entries_added}, LLM calls {total.llm_calls}"
            + (f", failed {total.failed}" if total.failed else "") + "\n"
            f"time: {secs}")
