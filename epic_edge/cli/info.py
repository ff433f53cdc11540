"""`epic-edge info`: counts, footprint by part and profile of a memory."""

from __future__ import annotations

import json

from epic_edge.cli.common import add_memory_options, human_bytes, open_memory, parser


def main(argv: list[str]) -> int:
    p = parser("info", "Show a memory's counts, footprint on disk by part, and profile.")
    p.add_argument("--json", action="store_true", help="print as JSON")
    add_memory_options(p)
    args = p.parse_args(argv)
    with open_memory(args, read_only=True) as memory:
        info = memory.info()
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    footprint = info.pop("footprint")
    info["budget"] = budget_text(info["budget"])
    for key, value in info.items():
        print(f"{key:>15}: {value}")
    print("    footprint:")
    for part, size in footprint.items():
        print(f"{part:>19}: {human_bytes(size):>10}  ({size} bytes)")
    return 0


def budget_text(budget: dict) -> str:
    """A memory's budget in words: "at most 390.6 KB on disk, any number of entries; ..."."""
    size, count = budget["max_bytes"], budget["max_entries"]
    on_disk = "no cap on disk" if size is None else f"at most {human_bytes(size)} on disk"
    entries = "any number of entries" if count is None else f"at most {count} entries"
    return (f"{on_disk}, {entries}; past it the least confident go first "
            f"(confidence halves every {budget['half_life_days']:g} days)")
