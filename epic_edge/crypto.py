"""Optional encryption at rest of personal text (items, instructions, preferences)."""

from __future__ import annotations

import hashlib
import hmac
import os

from epic_edge.errors import MemoryFileError, MissingExtraError

KEY_BYTES = 32
_NONCE_BYTES = 12
_CHECK_PLAINTEXT = b"epic-edge key check v1"


class Sealer:
    """AES-256-GCM over text fields; the key is the app's and is never written to the file.

    Without a key it stores text as is. With one, content hashes become keyed (HMAC), so
    the de-duplication table does not reveal which known texts a memory holds.
    """

    def __init__(self, key: bytes | None = None) -> None:
        self.key = key
        self._aead = None
        if key is None:
            return
        if not isinstance(key, (bytes, bytearray)) or len(key) != KEY_BYTES:
            raise MemoryFileError(f"an encryption key must be {KEY_BYTES} bytes")
        try:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        except ImportError as exc:
            raise MissingExtraError(
                "encryption at rest needs the cryptography package: "
                "pip install 'epic-edge[crypto]'"
            ) from exc
        self._aead = AESGCM(bytes(key))

    @property
    def enabled(self) -> bool:
        return self._aead is not None

    @staticmethod
    def new_key() -> bytes:
        """A fresh random key; the app keeps it (e.g. in the OS keystore), not beside the file."""
        return os.urandom(KEY_BYTES)

    def seal(self, text: str) -> str | bytes:
        if self._aead is None:
            return text
        nonce = os.urandom(_NONCE_BYTES)
        return nonce + self._aead.encrypt(nonce, text.encode("utf-8"), None)

    def open(self, value: str | bytes) -> str:
        if self._aead is None:
            if isinstance(value, bytes):
                raise MemoryFileError("this memory holds encrypted text: open it with its key")
            return value
        if isinstance(value, str):
            raise MemoryFileError("this memory holds unencrypted text but a key was given")
        from cryptography.exceptions import InvalidTag

        try:
            return self._aead.decrypt(value[:_NONCE_BYTES], value[_NONCE_BYTES:], None).decode()
        except InvalidTag as exc:
            raise MemoryFileError("wrong key for this memory, or its text was altered") from exc

    def check_token(self) -> str:
        """A value stored in meta that only this key reproduces (an HMAC, not the key)."""
        if self.key is None:
            return ""
        return hmac.new(bytes(self.key), _CHECK_PLAINTEXT, hashlib.sha256).hexdigest()

    def content_hash(self, text: str) -> bytes:
        """16-byte digest of an item's whitespace-normalised text, keyed when encrypted."""
        data = " ".join(text.split()).encode("utf-8")
        if self.key is None:
            return hashlib.sha256(data).digest()[:16]
        return hmac.new(bytes(self.key), data, hashlib.sha256).digest()[:16]
