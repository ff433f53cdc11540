"""`epic-edge budget`: cap a memory's entries or bytes; evicts by confidence and age."""

from __future__ import annotations

from epic_edge.cli.common import add_memory_options, open_memory, parser
from epic_edge.maintenance import DEFAULT_HALF_LIFE_DAYS


def main(argv: list[str]) -> int:
    p = parser("budget", "Set a memory's budget (stored in the file). When over it, the "
                         "entries with the lowest confidence x 0.5^(age / half-life) are "
                         "evicted first, now and after every ingest batch.")
    p.add_argument("--max-entries", type=int, default=None, help="most entries kept")
    p.add_argument("--max-bytes", type=int, default=None, help="most bytes on disk")
    p.add_argument("--half-life-days", type=float, default=DEFAULT_HALF_LIFE_DAYS,
                   help=f"age at which an entry's retention halves ({DEFAULT_HALF_LIFE_DAYS:g})")
    add_memory_options(p)
    args = p.parse_args(argv)
    with open_memory(args) as memory:
        evicted = memory.set_budget(args.max_entries, args.max_bytes, args.half_life_days)
        info = memory.info()
    print(f"budget {info['budget']}; evicted now {evicted}; entries {info['entries']}; "
          f"bytes {info['footprint']['total']}")
    return 0
