"""Text as a memory file stores it: raw deflate with a frozen preset dictionary, when smaller."""

from __future__ import annotations

import hashlib
import zlib
from functools import cache
from importlib import resources

from epic_edge.errors import DamagedRowError, MemoryFileError

# b"\xff" never starts UTF-8 text, so a packed value is told from a plain one (an encrypted
# file's plaintext of schema 3 or older) by its first byte; the second names the dictionary
MAGIC = b"\xff\x01"
# the dictionary of MAGIC's version: 32 KB of the sample corpus's wiki text, frozen (a file
# written with it can only be read with it); a new one needs a new version byte
DICTIONARY_SHA256 = "8f9dee2810a82b02141a1486c2385dcb08436da44a847924b2dcfb293abee09d"


@cache
def _dictionary() -> bytes:
    data = (resources.files("epic_edge") / "data" / "text_dictionary.txt").read_bytes()
    if hashlib.sha256(data).hexdigest() != DICTIONARY_SHA256:
        raise MemoryFileError("epic_edge/data/text_dictionary.txt is not the frozen dictionary "
                              "its memory files were written with: reinstall epic-edge")
    return data


@cache
def _deflater() -> zlib._Compress:
    """A raw-deflate compressor primed with the dictionary; `pack` copies it (priming costs more
    than packing a passage)."""
    return zlib.compressobj(9, zlib.DEFLATED, -15, 8, zlib.Z_DEFAULT_STRATEGY, _dictionary())


def pack(text: str) -> bytes | None:
    """MAGIC + the text's raw deflate stream, or None when that is not shorter than its UTF-8."""
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) < 8:
        return None
    deflate = _deflater().copy()
    packed = MAGIC + deflate.compress(raw) + deflate.flush()
    return packed if len(packed) < len(raw) else None


def is_packed(data: bytes) -> bool:
    return data[:len(MAGIC)] == MAGIC


def unpack(data: bytes) -> str:
    """The text `pack` packed; a damaged value is a MemoryFileError."""
    try:
        inflate = zlib.decompressobj(-15, zdict=_dictionary())
        raw = inflate.decompress(data[len(MAGIC):]) + inflate.flush()
        if not inflate.eof or inflate.unused_data:
            raise zlib.error("truncated stream" if not inflate.eof else "bytes after its end")
        return raw.decode("utf-8", "surrogatepass")
    except (zlib.error, UnicodeDecodeError) as exc:
        raise DamagedRowError(f"a stored text does not decompress ({exc}): the row is "
                              "damaged") from exc
