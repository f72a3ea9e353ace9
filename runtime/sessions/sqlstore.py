"""The session store over SQL, shared by the SQLite and the PostgreSQL backends.

A backend subclass supplies a transaction (``_transaction``: a context manager
yielding an object with ``execute(sql, params)`` taking ``?`` placeholders),
how it records the schema version, and how it translates its driver's errors.
Everything else (migrations, recovery, conversations, marks, responses and
leases) is written once, here and in ``rows``. Calls run in worker threads, so
the event loop never waits on the database.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar

import anyio.to_thread

from mol.core.errors import SessionBusy, SessionError
from mol.runtime.sessions import rows
from mol.runtime.sessions.base import LEASE_SEC, SessionInfo, TurnLog
from mol.runtime.sessions.schema import MIGRATIONS, render
from mol.runtime.views import Conversation, TurnRecord

T = TypeVar("T")


def new_owner() -> str:
    """A lease owner for this process: its identity (so a dead local holder is recognised
    at once) plus a token (two runtimes in one process are two owners)."""
    from mol.core.owner import current

    return f"{current().label()}#{secrets.token_hex(4)}"


def holder_dead(owner: str, expires: float, now: float) -> bool:
    """Whether a lease is free to take: expired, unowned, or its holder is a process of
    this machine that no longer runs."""
    from mol.core.owner import Owner

    if not owner or expires <= now:
        return True
    process = Owner.parse(owner.split("#", 1)[0])
    return process is not None and process.alive() is False


class SQLStore:
    """A ``SessionStore`` on one SQL database."""

    backend = "sql"
    """``sqlite`` or ``postgresql``: how migrations are rendered."""
    for_update = ""
    """What locks a selected row for the transaction (PostgreSQL: ``FOR UPDATE``)."""

    def __init__(self, location: str) -> None:
        self.location = location
        self.interrupted: list[tuple[str, int]] = []
        """Turns a dead process left running, marked interrupted at open (session, index)."""
        self._stored: dict[str, dict[str, int]] = {}

    # -- what a backend supplies ------------------------------------------------------------

    def _transaction(self, durable: bool = True) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def _schema_version(self, db: Any) -> int:
        raise NotImplementedError

    def _set_schema_version(self, db: Any, version: int) -> None:
        raise NotImplementedError

    def _run_script(self, db: Any, script: str) -> None:
        raise NotImplementedError

    def _guarded(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` translating the driver's errors into ``SessionError``."""
        raise NotImplementedError

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        return await anyio.to_thread.run_sync(self._guarded, fn, *args)

    def _tx(self, fn: Callable[..., T], *args: Any) -> T:
        with self._transaction() as db:
            return fn(db, *args)

    def _lazy_tx(self, fn: Callable[..., T], *args: Any) -> T:
        """``_tx`` without the flush to disk (``save(durable=False)``)."""
        with self._transaction(durable=False) as db:
            return fn(db, *args)

    # -- setup ------------------------------------------------------------------------------

    def _open(self) -> None:
        """Run the missing migrations, then recover turns left running by dead processes."""
        self._guarded(self._migrate)
        self.interrupted = self._guarded(self._tx, self._recover)

    def _migrate(self) -> None:
        while True:
            with self._transaction() as db:
                version = self._schema_version(db)
                if version > len(MIGRATIONS):
                    raise SessionError(f"{self.location}: schema version {version} is newer "
                                       f"than this mol knows ({len(MIGRATIONS)}); upgrade mol")
                if version == len(MIGRATIONS):
                    return
                migration = MIGRATIONS[version]
                if callable(migration):
                    migration(db, self.backend)
                else:
                    self._run_script(db, render(migration, self.backend))
                self._set_schema_version(db, version + 1)

    def _recover(self, db: Any) -> list[tuple[str, int]]:
        now = time.time()
        found = db.execute(
            "SELECT t.session_id, t.idx, l.owner, l.expires FROM turns t LEFT JOIN leases l "
            "ON l.session_id = t.session_id WHERE t.status = 'running'").fetchall()
        dead = [(r[0], r[1]) for r in found if holder_dead(r[2] or "", r[3] or 0.0, now)]
        for session_id, index in dead:
            db.execute("UPDATE turns SET status = 'interrupted', updated = ? "
                       "WHERE session_id = ? AND idx = ?", (now, session_id, index))
        return dead

    async def __aenter__(self) -> SQLStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the database connections."""

    # -- conversations ----------------------------------------------------------------------

    async def load(self, session_id: str) -> Conversation:
        """The stored conversation; ``SessionNotFound`` if there is none."""
        conversation = await self._call(self._tx, rows.load, session_id, self.location)
        self._stored[session_id] = {a: len(v) for a, v in conversation.views.items()}
        return conversation

    async def save(self, conversation: Conversation, record: TurnRecord | None,
                   log: TurnLog | None = None, parent: str | None = None, *,
                   durable: bool = True, turns: bool = True) -> None:
        """Persist the conversation and ``record`` in one transaction (compare-and-set on
        its revision; only the messages not stored yet are written); ``durable`` as in
        ``SessionStore.save``."""
        # A new session has nothing stored; a known one, what this process wrote or read.
        known = (dict(self._stored.get(conversation.id, {})) if conversation.revision
                 else dict.fromkeys(conversation.views, 0))
        lengths = await self._call(self._tx if durable else self._lazy_tx, rows.save,
                                   conversation, record, log or TurnLog(), parent, known,
                                   turns)
        self._stored[conversation.id] = lengths
        conversation.revision += 1

    async def sessions(self, limit: int = 50) -> list[SessionInfo]:
        """The most recently updated sessions, newest first."""
        return await self._call(self._tx, rows.sessions, limit)

    async def turn_logs(self, session_id: str) -> list[dict[str, Any]]:
        """Per turn: the HCP digest, usage and recorded events."""
        return await self._call(self._tx, rows.turn_logs, session_id)

    # -- marks and responses ----------------------------------------------------------------

    async def put_mark(self, key: str, session_id: str, mark: dict[str, Any],
                       response: tuple[str | None, dict[str, Any]] | None = None,
                       aliases: tuple[str, ...] = ()) -> None:
        """Name a point of a session by ``key`` and ``aliases``; with ``response`` (previous
        id, body), store that Responses API object under ``key``, in the same transaction."""
        stored = None if response is None else (
            response[0], json.dumps(response[1], ensure_ascii=False))
        await self._call(self._tx, rows.put_mark, (key, *aliases), session_id,
                         json.dumps(mark, ensure_ascii=False), stored)

    async def get_mark(self, key: str) -> tuple[str, dict[str, Any]] | None:
        """``(session_id, mark)`` for a key, or None."""
        row = await self._call(self._tx, lambda db: db.execute(
            "SELECT session_id, mark FROM marks WHERE key = ?", (key,)).fetchone())
        return None if row is None else (row[0], json.loads(row[1]))

    async def move_marks(self, session_id: str, old: dict[str, Any],
                         new: dict[str, Any]) -> int:
        """Every key naming the point ``old`` of the session names ``new`` instead."""
        return await self._call(self._tx, rows.move_marks, session_id, old,
                                json.dumps(new, ensure_ascii=False))

    async def asking(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Per waiting session: its calls left open for a person's answer."""
        return await self._call(self._tx, rows.asking)

    async def put_response(self, response_id: str, session_id: str, previous_id: str | None,
                           body: dict[str, Any]) -> None:
        """Store a Responses API object (once: responses are immutable)."""
        text = json.dumps(body, ensure_ascii=False)
        await self._call(self._tx, lambda db: db.execute(
            "INSERT INTO responses (id, session_id, previous_id, created, body) VALUES "
            "(?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
            (response_id, session_id, previous_id, time.time(), text)))

    async def get_response(self, response_id: str) -> dict[str, Any] | None:
        """A stored response object, or None."""
        row = await self._call(self._tx, lambda db: db.execute(
            "SELECT body FROM responses WHERE id = ?", (response_id,)).fetchone())
        return None if row is None else json.loads(row[0])

    async def delete_response(self, response_id: str) -> bool:
        """Forget a stored response and the mark its id names; False when there was none."""
        def delete(db: Any) -> bool:
            db.execute("DELETE FROM marks WHERE key = ?", (response_id,))
            return db.execute("DELETE FROM responses WHERE id = ?",
                              (response_id,)).rowcount == 1

        return await self._call(self._tx, delete)

    async def responses_of(self, session_id: str) -> list[tuple[str, str | None]]:
        """``(response id, previous id)`` of a session's stored responses, oldest first."""
        found = await self._call(self._tx, lambda db: db.execute(
            "SELECT id, previous_id FROM responses WHERE session_id = ? ORDER BY created",
            (session_id,)).fetchall())
        return [(r[0], r[1]) for r in found]

    # -- leases -----------------------------------------------------------------------------

    async def acquire(self, session_id: str, owner: str, ttl: float = LEASE_SEC) -> list[int]:
        """Take the session's lease (see ``SessionStore.acquire``)."""
        return await self._call(self._tx, self._acquire, session_id, owner, ttl)

    def _acquire(self, db: Any, session_id: str, owner: str, ttl: float) -> list[int]:
        now = time.time()
        db.execute("INSERT INTO leases (session_id, owner, expires) VALUES (?, '', 0) "
                   "ON CONFLICT (session_id) DO NOTHING", (session_id,))
        holder, expires = db.execute("SELECT owner, expires FROM leases WHERE session_id = ?"
                                     + self.for_update, (session_id,)).fetchone()
        if holder != owner and not holder_dead(holder, expires, now):
            raise SessionBusy(f"session {session_id!r} has a turn in flight elsewhere; "
                              f"retry within {expires - now:.0f} s", retry_after=expires - now)
        db.execute("UPDATE leases SET owner = ?, expires = ? WHERE session_id = ?",
                   (owner, now + ttl, session_id))
        if not holder or holder == owner:
            return []
        # Taking over from a dead holder: its turn in flight ended with it. Moving the
        # revision on fences the old holder out, should it wake up and write.
        running = [r[0] for r in db.execute("SELECT idx FROM turns WHERE session_id = ? AND "
                                            "status = 'running'", (session_id,)).fetchall()]
        db.execute("UPDATE turns SET status = 'interrupted', updated = ? WHERE session_id = ? "
                   "AND status = 'running'", (now, session_id))
        db.execute("UPDATE sessions SET revision = revision + 1 WHERE id = ?", (session_id,))
        self._stored.pop(session_id, None)
        return running

    async def renew(self, session_id: str, owner: str, ttl: float = LEASE_SEC) -> bool:
        """Extend ``owner``'s lease; False when it was lost."""
        return await self._call(self._tx, lambda db: db.execute(
            "UPDATE leases SET expires = ? WHERE session_id = ? AND owner = ?",
            (time.time() + ttl, session_id, owner)).rowcount == 1)

    async def release(self, session_id: str, owner: str) -> None:
        """Give the lease back."""
        await self._call(self._tx, lambda db: db.execute(
            "UPDATE leases SET owner = '', expires = 0 WHERE session_id = ? AND owner = ?",
            (session_id, owner)))
