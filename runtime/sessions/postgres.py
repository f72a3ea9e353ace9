"""The PostgreSQL store, for several ``mol serve`` replicas: the only module importing psycopg.

``session.store = "postgresql://user@host/db"`` (password from the URL or the
standard ``PG*`` environment variables / ``~/.pgpass``). A pool of connections
(``psycopg-pool``) serves the worker threads the calls run in. Every change is
one transaction; the schema is migrated under an advisory lock, so replicas
starting together migrate once. Needs ``pip install 'mol-agent[postgres]'``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from mol.core.errors import SessionError
from mol.runtime.sessions.sqlstore import SQLStore

T = TypeVar("T")

_MIGRATION_LOCK = 0x6D6F6C  # "mol": one advisory lock serialises migrations across replicas
POOL_SIZE = 8
"""Connections one replica keeps at most."""
CONNECT_TIMEOUT = 10.0


def redacted(url: str) -> str:
    """The URL without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


class _Db:
    """A connection with the ``?`` placeholders the shared SQL uses."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection

    def execute(self, sql: str, params: tuple = ()) -> Any:
        return self.connection.execute(sql.replace("?", "%s"), params)


class PostgresSessionStore(SQLStore):
    """A ``SessionStore`` in one PostgreSQL database, shared by any number of replicas."""

    backend = "postgresql"
    for_update = " FOR UPDATE"

    def __init__(self, url: str, *, pool_size: int = POOL_SIZE) -> None:
        super().__init__(redacted(url))
        try:
            import psycopg  # noqa: F401
            from psycopg_pool import ConnectionPool
        except ImportError as exc:
            raise SessionError(f"{self.location}: the PostgreSQL store needs psycopg: "
                               "pip install 'mol-agent[postgres]'") from exc
        url = "postgresql://" + url.split("://", 1)[1]  # libpq reads both; one spelling here
        self._guarded(self._probe, url)  # a precise reason at once, not a pool timeout later
        self._pool = ConnectionPool(url, min_size=1, max_size=pool_size, open=False,
                                    kwargs={"autocommit": False}, name="mol-sessions")
        self._guarded(self._pool.open, True, CONNECT_TIMEOUT)
        try:
            self._open()
        except BaseException:
            self._pool.close()
            raise

    def _probe(self, url: str) -> None:
        import psycopg

        try:
            psycopg.connect(url, connect_timeout=int(CONNECT_TIMEOUT)).close()
        except psycopg.OperationalError as exc:
            reason = " ".join(str(exc).split()) or type(exc).__name__
            raise SessionError(f"{self.location}: cannot connect to PostgreSQL: {reason}") from exc

    def close(self) -> None:
        """Close every pooled connection."""
        self._pool.close()

    @contextmanager
    def _transaction(self, durable: bool = True) -> Iterator[_Db]:
        with self._pool.connection() as connection:  # commits on success, else rolls back
            if not durable:  # the commit does not wait for the WAL flush (PostgreSQL docs)
                connection.execute("SET LOCAL synchronous_commit = off")
            yield _Db(connection)

    def _schema_version(self, db: Any) -> int:
        db.execute("SELECT pg_advisory_xact_lock(?)", (_MIGRATION_LOCK,))
        db.execute("CREATE TABLE IF NOT EXISTS mol_schema (version INTEGER NOT NULL)")
        row = db.execute("SELECT version FROM mol_schema").fetchone()
        if row is None:
            db.execute("INSERT INTO mol_schema (version) VALUES (0)")
            return 0
        return row[0]

    def _set_schema_version(self, db: Any, version: int) -> None:
        db.execute("UPDATE mol_schema SET version = ?", (version,))

    def _run_script(self, db: Any, script: str) -> None:
        db.connection.execute(script)  # no parameters: several statements in one go

    def _guarded(self, fn: Callable[..., T], *args: Any) -> T:
        import psycopg
        from psycopg_pool import PoolTimeout

        try:
            return fn(*args)
        except PoolTimeout as exc:
            raise SessionError(f"{self.location}: cannot connect to PostgreSQL within "
                               f"{CONNECT_TIMEOUT:g} s: {exc}") from exc
        except psycopg.Error as exc:
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise SessionError(f"{self.location}: {message}") from exc
