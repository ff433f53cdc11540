"""`epic-edge budget`: show or set a memory's cap on entries or bytes; evicts by policy."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

from epic_edge.cli.common import add_memory_options, open_memory, parser, plural, print_json
from epic_edge.errors import InvalidInputError
from epic_edge.maintenance import DEFAULT_HALF_LIFE_DAYS, Budget, enforce_budget
from epic_edge.memory import Memory
from epic_edge.store import MemoryStore


def evicted_by(memory: Memory, budget: Budget) -> tuple[int, int]:
    """(entries the budget would evict, bytes of the file after) from a trial on a copy."""
    with tempfile.TemporaryDirectory(prefix="epic-edge-budget-") as tmp:
        copy = Path(tmp) / "trial.epic"
        target = sqlite3.connect(copy)
        try:
            memory.store.conn.backup(target)
        finally:
            target.close()
        store = MemoryStore(copy, key=memory.store.sealer.key)
        try:
            return len(enforce_budget(store, budget)), store.file_bytes()
        finally:
            store.close()


def main(argv: list[str]) -> int:
    p = parser("budget", "Show a memory's budget, or set it (stored in the file). When over "
                         "it, the preference holding the most entries gives up its lowest "
                         "confidence x 0.5^(age / half-life) first, now and after every "
                         "ingest batch. A budget that would evict every entry is refused "
                         "unless --yes is given.")
    p.add_argument("--max-entries", type=int, default=None, help="most entries kept")
    p.add_argument("--max-bytes", type=int, default=None, help="most bytes on disk")
    p.add_argument("--half-life-days", type=float, default=None,
                   help=f"age at which an entry's retention halves ({DEFAULT_HALF_LIFE_DAYS:g})")
    p.add_argument("--clear", action="store_true", help="remove every limit")
    p.add_argument("--yes", action="store_true", help="apply even if it evicts every entry")
    p.add_argument("--json", action="store_true", help="print as JSON")
    add_memory_options(p)
    args = p.parse_args(argv)
    limits = (args.max_entries, args.max_bytes, args.half_life_days)
    if args.clear and any(v is not None for v in limits):
        p.error("--clear takes no limits")
    evicted = None
    setting = args.clear or any(v is not None for v in limits)
    with open_memory(args, read_only=not setting) as memory:
        if setting:
            budget = Budget(args.max_entries, args.max_bytes,
                            args.half_life_days or DEFAULT_HALF_LIFE_DAYS)
            entries = memory.info()["entries"]
            caps = (budget.max_entries, budget.max_bytes)
            if entries and not args.yes and all(v is None or v >= 0 for v in caps):
                would, floor = evicted_by(memory, budget)
                if would >= entries:
                    raise InvalidInputError(
                        f"this budget would evict all {entries} entries (with none left the "
                        f"file takes {floor} bytes); pass --yes to apply it anyway")
            evicted = memory.set_budget(budget.max_entries, budget.max_bytes,
                                        budget.half_life_days)
        info = memory.info()
    result = {"budget": info["budget"], "entries": info["entries"],
              "bytes": info["footprint"]["total"], "evicted_now": evicted}
    if args.json:
        print_json(result)
        return 0
    limits_text = ", ".join(f"{k} {'none' if v is None else v}"
                            for k, v in info["budget"].items())
    print(f"budget: {limits_text}; entries {info['entries']}; bytes {result['bytes']}")
    if evicted:
        print(f"evicted {plural(evicted, 'entry')} now")
    return 0
