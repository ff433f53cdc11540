"""`epic-edge keygen FILE`: write a new random encryption key to an owner-only file."""

from __future__ import annotations

from pathlib import Path

from epic_edge.cli.common import parser
from epic_edge.crypto import write_key_file


def main(argv: list[str]) -> int:
    p = parser("keygen", "Write a new random 32-byte key (hex) to FILE, mode 600, for "
                         "--key-file. Keep it apart from the memory (and backed up): without "
                         "it an encrypted memory cannot be read. Never overwrites a file.")
    p.add_argument("file", type=Path, help="key file to create")
    args = p.parse_args(argv)
    print(f"wrote a new key to {write_key_file(args.file)}")
    return 0
