"""Durable sessions: the ``SessionStore`` protocol and its SQLite implementation.

A session is one ``Conversation`` (per-adapter views, pending summaries, turn
records) plus what the client never sees but an operator needs: the HCP digest
of every turn, route decisions, tool calls and results, usage, and the ids of
the responses handed out with their chain.

The SQLite store runs in WAL mode with ``synchronous=FULL`` and writes every
state change in ONE transaction, so a process killed at any instant leaves the
last committed checkpoint whole. Opening the store marks turns left
``running`` by a dead process as ``interrupted``. The schema carries an ordered
list of migrations (``MIGRATIONS``); ``PRAGMA user_version`` says how many ran.

Marks name a point of a conversation (after a turn, or while it waits for
client tools) by a key: a response id, or the fingerprint of the client-visible
chat transcript. Views only ever grow at their end, so a mark is just the view
lengths, the pending summaries and the number of turns at that point: enough
to continue the conversation there or fork a new one from it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import anyio
import anyio.to_thread

from mol.runtime.errors import SessionError, SessionNotFound
from mol.runtime.views import Conversation, TurnRecord

T = TypeVar("T")

STORE_ENV = "MOL_SESSION_STORE"
"""Overrides the artifact's ``[session] store`` (a ``sqlite:///PATH`` URL or a plain path)."""

MIGRATIONS: list[str] = [
    # 1: sessions, turns, marks and responses.
    """
    CREATE TABLE sessions (
        id TEXT PRIMARY KEY, created REAL NOT NULL, updated REAL NOT NULL,
        hcp_digest TEXT NOT NULL DEFAULT '', parent TEXT, state TEXT NOT NULL);
    CREATE TABLE turns (
        session_id TEXT NOT NULL REFERENCES sessions(id), idx INTEGER NOT NULL,
        status TEXT NOT NULL, adapter TEXT NOT NULL, user_text TEXT NOT NULL,
        answer TEXT NOT NULL, summary TEXT NOT NULL, summary_ok INTEGER NOT NULL,
        route_raw TEXT NOT NULL, route_fallback INTEGER NOT NULL, tools TEXT NOT NULL,
        hcp_digest TEXT NOT NULL, usage TEXT NOT NULL, events TEXT NOT NULL,
        updated REAL NOT NULL, PRIMARY KEY (session_id, idx));
    CREATE TABLE marks (
        key TEXT PRIMARY KEY, session_id TEXT NOT NULL REFERENCES sessions(id),
        mark TEXT NOT NULL, created REAL NOT NULL);
    CREATE TABLE responses (
        id TEXT PRIMARY KEY, session_id TEXT NOT NULL, previous_id TEXT,
        created REAL NOT NULL, body TEXT NOT NULL);
    """,
    # 2: list sessions newest first without a scan.
    "CREATE INDEX sessions_updated ON sessions(updated);",
]
"""Ordered schema migrations; never edit one that shipped, append a new one."""


@dataclass(frozen=True)
class TurnLog:
    """What a checkpoint records of a turn besides the ``TurnRecord``."""

    hcp_digest: str = ""
    usage: dict[str, int] | None = None
    events: list[dict[str, Any]] | None = None
    """Route decisions, tool calls and results, model calls (no text deltas)."""


@dataclass(frozen=True)
class SessionInfo:
    """One line of ``mol sessions list``."""

    id: str
    created: float
    updated: float
    turns: int
    hcp_digest: str
    last_status: str


class SessionStore(Protocol):
    """Where conversations live between requests and across restarts."""

    async def load(self, session_id: str) -> Conversation:
        """The stored conversation; ``SessionNotFound`` if there is none."""
        ...

    async def save(self, conversation: Conversation, record: TurnRecord | None,
                   log: TurnLog | None = None, parent: str | None = None) -> None:
        """Persist the conversation state and ``record`` (every turn when None) in one
        transaction; ``parent``: the session this one was forked from."""
        ...

    async def put_mark(self, key: str, session_id: str, mark: dict[str, Any],
                       response: tuple[str | None, dict[str, Any]] | None = None) -> None:
        """Name a point of a session (see ``mol.runtime.server.marks``), optionally with
        the Responses API object stored under that key."""
        ...

    async def get_mark(self, key: str) -> tuple[str, dict[str, Any]] | None:
        """``(session_id, mark)`` for a key, or None."""
        ...


def store_path(url: str) -> Path:
    """The database file of a store URL: ``sqlite:///PATH`` (``~`` expanded) or a path."""
    if url.startswith("sqlite:///"):
        url = url[len("sqlite:///"):]  # as in SQLAlchemy: sqlite:////abs, sqlite:///rel
    elif "://" in url:
        raise SessionError(f"unsupported session store {url!r}: use sqlite:///PATH")
    return Path(os.path.expanduser(url))


def store_url_for(artifact: Any) -> str:
    """``$MOL_SESSION_STORE``, else the artifact's ``[session] store``."""
    return os.environ.get(STORE_ENV) or artifact.doc.session.store


def _private_file(path: Path) -> None:
    """Create ``path`` (and missing parent folders) readable by this user only: 0600, and
    0700 folders. SQLite gives its ``-wal`` and ``-shm`` files the database's mode.
    Existing files and folders keep theirs."""
    missing = [folder for folder in [path.parent, *path.parent.parents] if not folder.exists()]
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700)
    if not path.exists():
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))


class SQLiteSessionStore:
    """The embedded default ``SessionStore``: one SQLite file, WAL, full synchronous commits.

    Calls run in a worker thread, one at a time (SQLite has one writer anyway).
    Use it with ``async with`` or call ``close()``.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            _private_file(self.path)
            self._db = sqlite3.connect(self.path, isolation_level=None,
                                       check_same_thread=False, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
            self.interrupted = self._recover()
            """Turns a dead process left running, now marked interrupted (session, index)."""
        except sqlite3.Error as exc:
            raise SessionError(f"{self.path}: cannot open the session store: {exc}") from exc

    @classmethod
    def for_artifact(cls, artifact: Any) -> SQLiteSessionStore:
        """The store an artifact names (or ``$MOL_SESSION_STORE``)."""
        return cls(store_path(store_url_for(artifact)))

    async def __aenter__(self) -> SQLiteSessionStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the database (a checkpoint of the WAL happens here)."""
        with self._lock:
            self._db.close()

    # -- setup ----------------------------------------------------------------------------

    def _migrate(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > len(MIGRATIONS):
            raise SessionError(f"{self.path}: schema version {version} is newer than this mol "
                               f"knows ({len(MIGRATIONS)}); upgrade mol")
        for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
            # executescript commits first; BEGIN..COMMIT makes each migration atomic.
            self._db.executescript(f"BEGIN;\n{script}\nPRAGMA user_version = {number};\nCOMMIT;")

    def _recover(self) -> list[tuple[str, int]]:
        with self._tx() as db:
            rows = db.execute("SELECT session_id, idx FROM turns WHERE status = 'running'"
                              ).fetchall()
            db.execute("UPDATE turns SET status = 'interrupted', updated = ? "
                       "WHERE status = 'running'", (time.time(),))
        return [(r[0], r[1]) for r in rows]

    def _tx(self) -> _Transaction:
        return _Transaction(self._db)

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        def locked() -> T:
            with self._lock:
                try:
                    return fn(*args)
                except sqlite3.Error as exc:
                    raise SessionError(f"{self.path}: {exc}") from exc

        return await anyio.to_thread.run_sync(locked)

    # -- conversations --------------------------------------------------------------------

    async def load(self, session_id: str) -> Conversation:
        """The stored conversation; ``SessionNotFound`` if there is none."""
        return await self._run(self.load_sync, session_id)

    def load_sync(self, session_id: str) -> Conversation:
        """``load`` for synchronous callers that hold no event loop (the CLI's ``show``)."""
        row = self._db.execute("SELECT state FROM sessions WHERE id = ?",
                               (session_id,)).fetchone()
        if row is None:
            raise SessionNotFound(f"no session {session_id!r} in {self.path} "
                                  "(see 'mol sessions list')")
        state = json.loads(row[0])
        turns = [_record(r) for r in self._db.execute(
            f"SELECT {_TURN_COLUMNS} FROM turns WHERE session_id = ? ORDER BY idx",
            (session_id,))]
        return Conversation(id=session_id, views=state["views"], pending=state["pending"],
                            turns=turns, notes=state.get("notes", {}))

    async def save(self, conversation: Conversation, record: TurnRecord | None,
                   log: TurnLog | None = None, parent: str | None = None) -> None:
        """Persist the conversation state and ``record`` in one transaction."""
        # Encoded in the worker thread (megabytes for a long history would hold the event
        # loop), from a snapshot of the lists: messages themselves are never edited.
        state = {"views": {a: list(v) for a, v in conversation.views.items()},
                 "pending": {a: list(v) for a, v in conversation.pending.items()},
                 "notes": {a: list(v) for a, v in conversation.notes.items()}}
        await self._run(self._save, conversation.id, state, record, log or TurnLog(), parent,
                        list(conversation.turns) if record is None else [record])

    def _save(self, session_id: str, snapshot: dict[str, Any], record: TurnRecord | None,
              log: TurnLog, parent: str | None, records: list[TurnRecord]) -> None:
        state = json.dumps(snapshot, ensure_ascii=False)
        now = time.time()
        with self._tx() as db:
            db.execute(
                "INSERT INTO sessions (id, created, updated, hcp_digest, parent, state) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET updated = excluded."
                "updated, hcp_digest = excluded.hcp_digest, state = excluded.state",
                (session_id, now, now, log.hcp_digest, parent, state))
            for turn in records:
                turn_log = log if turn is record else TurnLog(log.hcp_digest)
                db.execute(f"INSERT OR REPLACE INTO turns (session_id, {_TURN_COLUMNS}, "
                           "hcp_digest, usage, events, updated) VALUES "
                           f"(?, {', '.join('?' * 14)})",
                           (session_id, *_row(turn), turn_log.hcp_digest,
                            json.dumps(turn_log.usage or {}),
                            json.dumps(turn_log.events or [], ensure_ascii=False), now))

    async def sessions(self, limit: int = 50) -> list[SessionInfo]:
        """The most recently updated sessions, newest first."""
        return await self._run(self._sessions, limit)

    def _sessions(self, limit: int) -> list[SessionInfo]:
        rows = self._db.execute(
            "SELECT s.id, s.created, s.updated, s.hcp_digest, COUNT(t.idx), "
            "(SELECT status FROM turns WHERE session_id = s.id ORDER BY idx DESC LIMIT 1) "
            "FROM sessions s LEFT JOIN turns t ON t.session_id = s.id "
            "GROUP BY s.id ORDER BY s.updated DESC LIMIT ?", (limit,)).fetchall()
        return [SessionInfo(r[0], r[1], r[2], r[4], r[3], r[5] or "") for r in rows]

    async def turn_logs(self, session_id: str) -> list[dict[str, Any]]:
        """Per turn: the HCP digest, usage and recorded events."""
        return await self._run(self._turn_logs, session_id)

    def _turn_logs(self, session_id: str) -> list[dict[str, Any]]:
        rows = self._db.execute("SELECT idx, hcp_digest, usage, events FROM turns "
                                "WHERE session_id = ? ORDER BY idx", (session_id,))
        return [{"index": r[0], "hcp_digest": r[1], "usage": json.loads(r[2]),
                 "events": json.loads(r[3])} for r in rows]

    # -- marks and responses --------------------------------------------------------------

    async def put_mark(self, key: str, session_id: str, mark: dict[str, Any],
                       response: tuple[str | None, dict[str, Any]] | None = None) -> None:
        """Name a point of a session by ``key``; with ``response`` (previous id, body), store
        that Responses API object under the same id in the same transaction."""
        body = None if response is None else json.dumps(response[1], ensure_ascii=False)
        await self._run(self._put_mark, key, session_id, json.dumps(mark, ensure_ascii=False),
                        None if response is None else response[0], body)

    def _put_mark(self, key: str, session_id: str, mark: str, previous_id: str | None,
                  body: str | None) -> None:
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO marks (key, session_id, mark, created) "
                       "VALUES (?, ?, ?, ?)", (key, session_id, mark, time.time()))
            if body is not None:
                self._insert_response(db, key, session_id, previous_id, body)

    async def get_mark(self, key: str) -> tuple[str, dict[str, Any]] | None:
        """``(session_id, mark)`` for a key, or None."""
        row = await self._run(lambda: self._db.execute(
            "SELECT session_id, mark FROM marks WHERE key = ?", (key,)).fetchone())
        return None if row is None else (row[0], json.loads(row[1]))

    async def put_response(self, response_id: str, session_id: str, previous_id: str | None,
                           body: dict[str, Any]) -> None:
        """Store a Responses API object so ``GET /v1/responses/{id}`` can return it."""
        text = json.dumps(body, ensure_ascii=False)

        def put() -> None:
            with self._tx() as db:
                self._insert_response(db, response_id, session_id, previous_id, text)

        await self._run(put)

    @staticmethod
    def _insert_response(db: sqlite3.Connection, response_id: str, session_id: str,
                         previous_id: str | None, body: str) -> None:
        db.execute("INSERT OR REPLACE INTO responses (id, session_id, previous_id, created, "
                   "body) VALUES (?, ?, ?, ?, ?)",
                   (response_id, session_id, previous_id, time.time(), body))

    async def get_response(self, response_id: str) -> dict[str, Any] | None:
        """A stored response object, or None."""
        row = await self._run(lambda: self._db.execute(
            "SELECT body FROM responses WHERE id = ?", (response_id,)).fetchone())
        return None if row is None else json.loads(row[0])

    async def responses_of(self, session_id: str) -> list[tuple[str, str | None]]:
        """``(response id, previous id)`` of a session's stored responses, oldest first."""
        return await self._run(lambda: [tuple(r) for r in self._db.execute(
            "SELECT id, previous_id FROM responses WHERE session_id = ? ORDER BY created",
            (session_id,))])


class _Transaction:
    """``BEGIN IMMEDIATE`` .. ``COMMIT`` (``ROLLBACK`` on error) on an autocommit connection."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, kind: object, *rest: object) -> None:
        self.db.execute("ROLLBACK" if kind is not None else "COMMIT")


_TURN_COLUMNS = ("idx, status, adapter, user_text, answer, summary, summary_ok, route_raw, "
                 "route_fallback, tools")


def _row(turn: TurnRecord) -> tuple[Any, ...]:
    return (turn.index, turn.status, turn.adapter, turn.user, turn.answer, turn.summary,
            int(turn.summary_ok), turn.route_raw, int(turn.route_fallback),
            json.dumps(turn.tools))


def _record(row: tuple[Any, ...]) -> TurnRecord:
    return TurnRecord(index=row[0], status=row[1], adapter=row[2], user=row[3], answer=row[4],
                      summary=row[5], summary_ok=bool(row[6]), route_raw=row[7],
                      route_fallback=bool(row[8]), tools=json.loads(row[9]))
