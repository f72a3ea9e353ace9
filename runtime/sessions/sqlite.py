"""The embedded default store: one SQLite file, WAL, full synchronous commits.

A commit that need not outlive the machine (``save(durable=False)``) runs with
``synchronous=NORMAL``: in WAL mode it is written to the WAL but not flushed, so it
survives the process being killed; the next FULL commit flushes it with its own.

Every state change is ONE transaction (``BEGIN IMMEDIATE`` .. ``COMMIT``), so a
process killed at any instant leaves the last committed checkpoint whole. One
connection, used by one worker thread at a time (SQLite has one writer anyway).
The database file and its WAL are created readable by their owner only.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from mol.core.errors import SessionError
from mol.runtime.sessions.sqlstore import SQLStore

T = TypeVar("T")


def _private_folders(folder: Path) -> None:
    """Create ``folder`` and its missing parents readable by this user only (0700);
    existing folders keep their modes."""
    missing = [f for f in [folder, *folder.parents] if not f.exists()]
    for path in reversed(missing):
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700)


class SQLiteSessionStore(SQLStore):
    """A ``SessionStore`` in one SQLite file. Use it with ``async with`` or ``close()``."""

    backend = "sqlite"

    def __init__(self, path: str | Path) -> None:
        super().__init__(str(path))
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            _private_folders(self.path.parent)
            old = os.umask(0o077)  # the database, its WAL and shm: owner only
            try:
                self._db = sqlite3.connect(self.path, isolation_level=None,
                                           check_same_thread=False, timeout=30)
                self._db.execute("PRAGMA journal_mode=WAL")
            finally:
                os.umask(old)
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute("PRAGMA foreign_keys=ON")
        except sqlite3.Error as exc:
            raise SessionError(f"{self.path}: cannot open the session store: {exc}") from exc
        self._open()

    def close(self) -> None:
        """Close the database (a checkpoint of the WAL happens here)."""
        with self._lock:
            self._db.close()

    @contextmanager
    def _transaction(self, durable: bool = True) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if not durable:
                self._db.execute("PRAGMA synchronous=NORMAL")
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    yield self._db
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            finally:
                if not durable:
                    self._db.execute("PRAGMA synchronous=FULL")

    def _schema_version(self, db: Any) -> int:
        return db.execute("PRAGMA user_version").fetchone()[0]

    def _set_schema_version(self, db: Any, version: int) -> None:
        db.execute(f"PRAGMA user_version = {int(version)}")

    def _run_script(self, db: Any, script: str) -> None:
        for statement in script.split(";"):
            if statement.strip():
                db.execute(statement)

    def _guarded(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            return fn(*args)
        except sqlite3.Error as exc:
            raise SessionError(f"{self.path}: {exc}") from exc
