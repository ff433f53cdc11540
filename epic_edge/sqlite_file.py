"""A SQLite file opened safely: WAL, integrity check, atomic transactions, errors a user reads."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from epic_edge.errors import MemoryFileError

_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=FULL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA secure_delete=ON",
)


class SQLiteFile:
    """Owns one SQLite connection; every write happens inside `transaction()`.

    Durability: WAL with synchronous=FULL, so a transaction that committed survives a crash or
    a power cut. Deleted text is overwritten (secure_delete) and the WAL truncated on close.
    """

    def __init__(self, path: str | Path, *, timeout: float = 10.0) -> None:
        self.path = Path(path)
        try:
            if self.path.is_dir():
                raise MemoryFileError(f"{self.path} is a folder; give the memory file's path")
            if self.path.exists() and self.path.stat().st_size > 0:
                with open(self.path, "rb") as fh:
                    if fh.read(16) != b"SQLite format 3\x00":
                        raise MemoryFileError(f"{self.path} is not an epic-edge memory file")
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a folder that cannot exist (/proc/...), no permission, ...
            raise MemoryFileError(f"cannot open memory file {self.path}: "
                                  f"{exc.strerror or exc}") from exc
        self._lock = threading.RLock()
        try:
            self.conn = sqlite3.connect(
                str(self.path), timeout=timeout, check_same_thread=False, isolation_level=None
            )
        except sqlite3.DatabaseError as exc:
            raise MemoryFileError(f"cannot open memory file {self.path}: {exc}") from exc
        try:
            with self._translate():
                for pragma in _PRAGMAS:
                    self.conn.execute(pragma)
                result = self.conn.execute("PRAGMA quick_check").fetchone()[0]
                if result != "ok":
                    raise sqlite3.DatabaseError(f"integrity check failed: {result}")
        except BaseException:
            self.conn.close()
            raise
        self.data_version = self._data_version()

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
                self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.DatabaseError:
                pass  # another process holds the WAL; it checkpoints on its own close
            self.conn.close()

    def vacuum(self) -> None:
        """Return freed pages to the file system and truncate the WAL.

        A full VACUUM rewrites the file: milliseconds for a memory of a few MB, and no freed
        page (nor its old text) survives it.
        """
        with self._lock, self._translate():
            try:
                if self.conn.execute("PRAGMA freelist_count").fetchone()[0]:
                    self.conn.execute("VACUUM")
            finally:  # even when VACUUM failed (disk full), the WAL's pages go into the file
                self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def file_bytes(self) -> int:
        """Bytes on disk after a checkpoint: the file and its WAL."""
        with self._lock, self._translate():
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return sum(p.stat().st_size for p in self._files())

    def _files(self) -> list[Path]:
        # the -shm file is a shared-memory index SQLite rebuilds; it is not memory content
        return [p for p in (self.path, Path(f"{self.path}-wal")) if p.exists()]
