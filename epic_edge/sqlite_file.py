"""A SQLite file opened safely: WAL, integrity check, atomic transactions, errors a user reads."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from epic_edge.errors import MemoryFileError

_WAL = "PRAGMA journal_mode=WAL"
_PRAGMAS = (
    "PRAGMA synchronous=FULL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA secure_delete=ON",
    "PRAGMA journal_size_limit=0",  # a checkpointed WAL is cut back to nothing on disk
)


def create_private(path: Path) -> Path:
    """Create a missing file 0600 and its missing folders 0700 (owner only), before SQLite
    creates it with the umask's mode; SQLite gives its -wal and -shm files the file's mode.
    A symlink is followed: the file it points to is the one created owner-only (and SQLite,
    which follows it too, puts the -wal and -shm files beside it). Returns that path."""
    target = Path(os.path.realpath(path))
    missing = [p for p in target.parents if not p.exists()]
    for folder in reversed(missing):
        folder.mkdir(mode=0o700, exist_ok=True)
    try:
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
    except FileExistsError:
        pass
    return target


def _text_or_bytes(data: bytes) -> str | bytes:
    """A TEXT cell as str; one that is not UTF-8 (damaged) as its bytes, which the reads of
    its row then find damaged, where an error would stop the whole query."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data


class SQLiteFile:
    """Owns one SQLite connection; every write happens inside `transaction()`.

    Durability: WAL with synchronous=FULL, so a transaction that committed survives a crash or
    a power cut. Deleted text is overwritten (secure_delete) and the WAL truncated on close.
    `read_only` opens an existing file without writing to it (no WAL switch, no checkpoint).
    """

    def __init__(self, path: str | Path, *, timeout: float = 10.0,
                 read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        try:
            if self.path.is_dir():
                raise MemoryFileError(f"{self.path} is a folder; give the memory file's path")
            existed = self.path.exists() and self.path.stat().st_size > 0
            if existed:
                with open(self.path, "rb") as fh:
                    if fh.read(16) != b"SQLite format 3\x00":
                        raise MemoryFileError(f"{self.path} is not an epic-edge memory file")
            elif read_only and not self.path.is_file():
                raise MemoryFileError(f"no memory file at {self.path}")
            target = self.path if read_only else create_private(self.path)
        except OSError as exc:  # a folder that cannot exist (/proc/...), no permission, ...
            raise MemoryFileError(f"cannot open memory file {self.path}: "
                                  f"{exc.strerror or exc}") from exc
        self._lock = threading.RLock()
        try:
            if read_only:
                name, uri = f"file:{quote(os.fsencode(self.path.resolve()))}?mode=ro", True
            else:
                name, uri = str(target), False
            self.conn = sqlite3.connect(name, timeout=timeout, check_same_thread=False,
                                        isolation_level=None, uri=uri)
            self.conn.text_factory = _text_or_bytes
        except sqlite3.DatabaseError as exc:
            raise MemoryFileError(f"cannot open memory file {self.path}: {exc}") from exc
        try:
            with self._translate():
                problem = self.foreign(self.conn) if existed and not read_only else None
                if problem:  # checked before WAL is switched on: the file stays as it was
                    raise MemoryFileError(f"{self.path} {problem}")
                for pragma in _PRAGMAS if read_only else (_WAL, *_PRAGMAS):
                    self.conn.execute(pragma)
                result = self.conn.execute("PRAGMA quick_check").fetchone()[0]
                if result != "ok":
                    raise sqlite3.DatabaseError(f"integrity check failed: {result}")
        except BaseException:
            self.conn.close()
            raise
        self.data_version = self._data_version()

    def foreign(self, conn: sqlite3.Connection) -> str | None:
        """Why an existing SQLite file is not this kind of file (a subclass says), before
        anything is written to it; None when it is."""
        return None

    @contextmanager
    def _translate(self) -> Iterator[None]:
        """Turn SQLite's errors into MemoryFileError with a message a user can act on."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise MemoryFileError(
                    f"{self.path} is being written by another process; try again later"
                ) from exc
            raise MemoryFileError(f"memory file {self.path}: {exc}") from exc
        except sqlite3.IntegrityError as exc:  # a race with another writer, not a damaged file
            raise MemoryFileError(
                f"{self.path} was changed by another writer during this one ({exc}); nothing "
                "was written: try again"
            ) from exc
        except sqlite3.DatabaseError as exc:
            raise MemoryFileError(
                f"memory file {self.path} is corrupt or unreadable ({exc}); restore it from "
                "a backup or build a new memory"
            ) from exc

    def _data_version(self) -> int:
        with self._lock, self._translate():
            return int(self.conn.execute("PRAGMA data_version").fetchone()[0])

    def changed_elsewhere(self) -> bool:
        """True once after another connection (another process) committed a change."""
        version = self._data_version()
        changed, self.data_version = version != self.data_version, version
        return changed

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic write: everything inside commits together or not at all."""
        with self._lock, self._translate():
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")

    def query(self, sql: str, params: Iterable[Any] = ()) -> list[tuple]:
        """Run a read under the lock, with errors translated."""
        with self._lock, self._translate():
            return self.conn.execute(sql, tuple(params)).fetchall()

    def close(self) -> None:
        with self._lock:
            try:
                if not self.read_only:
                    self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.DatabaseError:
                pass  # another process holds the WAL; it checkpoints on its own close
            self.conn.close()

    def vacuum(self, repack: bool = False) -> None:
        """Return freed pages to the file system and truncate the WAL.

        A full VACUUM rewrites the file: milliseconds for a memory of a few MB, and no freed
        page (nor its old text) survives it. It runs when some page is free, or always with
        `repack`: rows deleted from pages that still hold others free no page, and only a
        VACUUM packs the rest together.
        """
        with self._lock, self._translate():
            try:
                if repack or self.conn.execute("PRAGMA freelist_count").fetchone()[0]:
                    self.conn.execute("VACUUM")
            finally:  # even when VACUUM failed (disk full), the WAL's pages go into the file
                self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def checkpoint(self) -> None:
        """Copy the WAL into the file as far as readers allow, without waiting on them."""
        with self._lock, self._translate():
            if not self.read_only:
                self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def file_bytes(self) -> int:
        """Bytes on disk after a checkpoint (none when read-only): the file and its WAL."""
        with self._lock, self._translate():
            if not self.read_only:
                self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return sum(p.stat().st_size for p in self._files())

    def content_bytes(self) -> int:
        """Bytes the content uses: (page_count - freelist_count) x page_size, whether or not
        a reader in another process keeps the WAL from being checkpointed into the file."""
        with self._lock, self._translate():
            pages, free, size = (self.conn.execute(f"PRAGMA {name}").fetchone()[0]
                                 for name in ("page_count", "freelist_count", "page_size"))
        return (int(pages) - int(free)) * int(size)

    def _files(self) -> list[Path]:
        # the -shm file is a shared-memory index SQLite rebuilds; it is not memory content
        return [p for p in (self.path, Path(f"{self.path}-wal")) if p.exists()]
