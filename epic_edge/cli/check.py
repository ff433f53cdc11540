"""`epic-edge check`: integrity of a memory file (SQLite, rows, embeddings, index)."""

from __future__ import annotations

from epic_edge.cli.common import add_memory_options, open_memory, parser, print_json


def main(argv: list[str]) -> int:
    p = parser("check", "Check a memory file: SQLite integrity, foreign keys, every row "
                        "against its checksum (text, ids, vectors, confidences; rows written "
                        "before schema 5 have none), that every text opens and every embedding "
                        "decodes with the embedder's dim and unit norm, that no item is "
                        "orphaned, and that the vector index matches the entries. A damaged "
                        "row is listed here and left out by reads. Exit status 1 when a "
                        "problem is found.")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    add_memory_options(p)
    args = p.parse_args(argv)
    with open_memory(args, read_only=True) as memory:
        report = memory.check()
    if args.json:
        print_json({"ok": report.ok, "problems": report.problems, "counts": report.counts})
        return 0 if report.ok else 1
    counts = ", ".join(f"{k} {v}" for k, v in report.counts.items())
    if report.ok:
        print(f"ok: {counts}")
        return 0
    for problem in report.problems:
        print(f"problem: {problem}")
    return 1
