"""The options every committed-artifact trainer shares: train, then pack or check it."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from epic_edge.cli.common import parser
from epic_edge.errors import InvalidInputError


def main(argv: list[str], command: str, about: str, artifact: str, same: str,
         train: Callable[[Path], Any], check: Callable[[Path], dict[str, Any]],
         pack: Callable[[Path, Path], Path]) -> int:
    """`command` [--out DIR] [--check] [--pack FILE] [--from DIR]: `train` into a folder,
    `pack` it as a new artifact, or `check` it against the committed `artifact` (exit 1 unless
    it reproduces: `same` says what that means)."""
    p = parser(command, about)
    p.add_argument("--out", type=Path, default=None,
                   help="folder to train into (default: a temporary one)")
    p.add_argument("--check", action="store_true",
                   help=f"compare with {artifact} (exit 1 if not {same})")
    p.add_argument("--pack", type=Path, default=None,
                   help="write the trained model as a new artifact here (.tar.xz)")
    p.add_argument("--from", dest="trained", type=Path, default=None,
                   help="a folder trained already: check or pack it without training")
    args = p.parse_args(argv)
    if args.trained is not None and not args.trained.is_dir():
        raise InvalidInputError(f"--from {args.trained}: not a folder (a trained model's, as "
                                "--out writes it)")
    if args.trained is not None and not (args.check or args.pack):
        raise InvalidInputError("--from wants --check or --pack: there is nothing else to do "
                                "with a trained folder")
    with tempfile.TemporaryDirectory(prefix="epic-train-") as tmp:
        folder = args.trained or args.out or Path(tmp)
        if args.trained is None:
            train(folder)
        if args.pack:
            print(f"packed {pack(folder, args.pack)}")
        if args.check:
            result = check(folder)
            print(json.dumps(result, indent=1))
            return 0 if result["reproduces"] else 1
    return 0
