"""Optional encryption at rest of a memory: text, vectors, item ids; and reading keys."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import stat
from pathlib import Path

from epic_edge import text_codec
from epic_edge.errors import DamagedRowError, MemoryFileError
from epic_edge.optional import optional_import

KEY_BYTES = 32
_NONCE_BYTES = 12
_CHECK_PLAINTEXT = b"epic-edge key check v1"


class Sealer:
    """AES-256-GCM over text and vectors; the key is the app's and is never written to the file.

    Without a key it stores everything as is. With one, content hashes and item ids become
    keyed (HMAC), so neither the de-duplication table nor the ids reveal which known texts
    or ids a memory holds.
    """

    def __init__(self, key: bytes | None = None) -> None:
        self.key = key
        self._aead = None
        if key is None:
            return
        if not isinstance(key, (bytes, bytearray)) or len(key) != KEY_BYTES:
            raise MemoryFileError(f"an encryption key must be {KEY_BYTES} bytes")
        aead = optional_import("cryptography.hazmat.primitives.ciphers.aead", "crypto",
                               "encryption at rest")
        self._aead = aead.AESGCM(bytes(key))

    @property
    def enabled(self) -> bool:
        return self._aead is not None

    @staticmethod
    def new_key() -> bytes:
        """A fresh random key; the app keeps it (e.g. in the OS keystore), not beside the file."""
        return os.urandom(KEY_BYTES)

    def seal(self, text: str) -> str | bytes:
        """Text as stored: packed (text_codec) when that is shorter, then sealed with a key."""
        packed = text_codec.pack(text)
        if self._aead is None:
            return text if packed is None else packed
        return self.seal_bytes(text.encode("utf-8") if packed is None else packed)

    def open(self, value: str | bytes) -> str:
        if self._aead is None:
            if isinstance(value, str):
                return value
            if text_codec.is_packed(value):
                return text_codec.unpack(value)
            # the key check at open tells an encrypted file: in a clear one this is damage
            raise DamagedRowError("a stored text is neither text nor packed text: the row is "
                                  "damaged")
        if isinstance(value, str):
            raise DamagedRowError("a stored text is in clear in an encrypted memory: the row "
                                  "is damaged")
        data = self.open_bytes(value)
        return text_codec.unpack(data) if text_codec.is_packed(data) else data.decode()

    def seal_bytes(self, data: bytes) -> bytes:
        """A vector's bytes sealed (28 bytes longer); as is without a key."""
        if self._aead is None:
            return data
        nonce = os.urandom(_NONCE_BYTES)
        return nonce + self._aead.encrypt(nonce, bytes(data), None)

    def open_bytes(self, value: bytes) -> bytes:
        if self._aead is None:
            return value
        from cryptography.exceptions import InvalidTag

        try:
            return self._aead.decrypt(value[:_NONCE_BYTES], value[_NONCE_BYTES:], None)
        except InvalidTag as exc:
            raise DamagedRowError("a stored value does not open with this memory's key: it "
                                  "was altered") from exc

    def id_hash(self, external_id: str) -> str:
        """An item id as stored: keyed (32 hex digits) with a key, else as is; "" stays "".
        Equal ids still match, so an item that returns under its id replaces the old one."""
        if self.key is None or not external_id:
            return external_id
        data = b"item-id\0" + external_id.encode("utf-8", "surrogatepass")
        return hmac.new(bytes(self.key), data, hashlib.sha256).hexdigest()[:32]

    def check_token(self) -> str:
        """A value stored in meta that only this key reproduces (an HMAC, not the key)."""
        if self.key is None:
            return ""
        return hmac.new(bytes(self.key), _CHECK_PLAINTEXT, hashlib.sha256).hexdigest()

    def content_hash(self, text: str, item_id: str = "") -> bytes:
        """16-byte digest of an item's whitespace-normalised text and its id, keyed when
        encrypted: an item's identity is its id when it has one (two ids, two items), else
        its text. An item without an id hashes as before ids counted."""
        data = " ".join(text.split()).encode("utf-8")
        if item_id:
            data = b"item-id\0" + item_id.encode("utf-8", "surrogatepass") + b"\0" + data
        if self.key is None:
            return hashlib.sha256(data).digest()[:16]
        return hmac.new(bytes(self.key), data, hashlib.sha256).digest()[:16]


def parse_key(text: str | bytes, where: str) -> bytes:
    """A 32-byte key from raw bytes, hex (64 digits) or base64 (44 characters)."""
    if isinstance(text, bytes):
        if len(text) == KEY_BYTES:
            return text
        text = text.decode("ascii", errors="replace")
    text = text.strip()
    for decode in (bytes.fromhex, lambda t: base64.b64decode(t, validate=True)):
        try:
            key = decode(text)
        except (ValueError, binascii.Error):
            continue
        if len(key) == KEY_BYTES:
            return key
    raise MemoryFileError(f"{where} must hold a {KEY_BYTES}-byte key as hex (64 digits) or "
                          "base64 (44 characters); `epic-edge keygen FILE` writes one")


def read_key_file(path: str | Path) -> bytes:
    """A key from a file that only its owner (this user) can read or write."""
    path = Path(path)
    try:
        info = path.stat()
        if info.st_uid != os.getuid():
            raise MemoryFileError(f"key file {path} belongs to another user")
        if stat.S_IMODE(info.st_mode) & 0o077:
            raise MemoryFileError(f"key file {path} is open to other users "
                                  f"(mode {stat.S_IMODE(info.st_mode):o}): chmod 600 {path}")
        return parse_key(path.read_bytes(), f"key file {path}")
    except OSError as exc:
        raise MemoryFileError(f"cannot read key file {path}: {exc.strerror}") from exc


def write_key_file(path: str | Path) -> Path:
    """Write a new random key (hex) to a new file, mode 0600; never replaces one."""
    path = Path(path)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError as exc:
        raise MemoryFileError(f"{path} exists; a key is never overwritten") from exc
    except OSError as exc:
        raise MemoryFileError(f"cannot write key file {path}: {exc.strerror}") from exc
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        fh.write(Sealer.new_key().hex() + "\n")
    return path
