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
    for key, value in info.items():
        print(f"{key:>13}: {value}")
    print("    footprint:")
    for part, size in footprint.items():
        print(f"{part:>17}: {human_bytes(size):>10}  ({size} bytes)")
    return 0
