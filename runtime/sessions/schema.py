"""The session database's schema: one ordered list of migrations for every backend.

An entry is SQL text (``{real}`` stands for the backend's double-precision
type: SQLite's ``REAL``, PostgreSQL's ``DOUBLE PRECISION``) or a function
``(db, backend_name)`` for a migration that moves data. Each runs in its own
transaction; the store records how many ran. Never edit an entry that shipped:
append one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


def _views_to_rows(db: Any, backend: str) -> None:
    """Views used to live inside ``sessions.state``; now every message is a row, so a
    checkpoint appends what changed instead of rewriting the whole conversation."""
    for session_id, state in db.execute("SELECT id, state FROM sessions").fetchall():
        data = json.loads(state)
        views = data.pop("views", None) or {}
        for adapter, messages in views.items():
            for index, message in enumerate(messages):
                db.execute("INSERT INTO messages (session_id, adapter, idx, body) "
                           "VALUES (?, ?, ?, ?)",
                           (session_id, adapter, index, json.dumps(message, ensure_ascii=False)))
        db.execute("UPDATE sessions SET state = ? WHERE id = ?",
                   (json.dumps(data, ensure_ascii=False), session_id))


Migration = str | Callable[[Any, str], None]

MIGRATIONS: list[Migration] = [
    # 1: sessions, turns, marks and responses.
    """
    CREATE TABLE sessions (
        id TEXT PRIMARY KEY, created {real} NOT NULL, updated {real} NOT NULL,
        hcp_digest TEXT NOT NULL DEFAULT '', parent TEXT, state TEXT NOT NULL);
    CREATE TABLE turns (
        session_id TEXT NOT NULL REFERENCES sessions(id), idx INTEGER NOT NULL,
        status TEXT NOT NULL, adapter TEXT NOT NULL, user_text TEXT NOT NULL,
        answer TEXT NOT NULL, summary TEXT NOT NULL, summary_ok INTEGER NOT NULL,
        route_raw TEXT NOT NULL, route_fallback INTEGER NOT NULL, tools TEXT NOT NULL,
        hcp_digest TEXT NOT NULL, usage TEXT NOT NULL, events TEXT NOT NULL,
        updated {real} NOT NULL, PRIMARY KEY (session_id, idx));
    CREATE TABLE marks (
        key TEXT PRIMARY KEY, session_id TEXT NOT NULL REFERENCES sessions(id),
        mark TEXT NOT NULL, created {real} NOT NULL);
    CREATE TABLE responses (
        id TEXT PRIMARY KEY, session_id TEXT NOT NULL, previous_id TEXT,
        created {real} NOT NULL, body TEXT NOT NULL);
    """,
    # 2: list sessions newest first without a scan.
    "CREATE INDEX sessions_updated ON sessions(updated);",
    # 3: messages as rows, a revision per session (compare-and-set), leases of turns.
    """
    CREATE TABLE messages (
        session_id TEXT NOT NULL REFERENCES sessions(id), adapter TEXT NOT NULL,
        idx INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (session_id, adapter, idx));
    ALTER TABLE sessions ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE leases (
        session_id TEXT PRIMARY KEY, owner TEXT NOT NULL, expires {real} NOT NULL);
    CREATE INDEX responses_session ON responses(session_id);
    """,
    # 4: existing views move into the messages table.
    _views_to_rows,
    # 5: a session's marks found without a scan (a turn that waited for a person moves them).
    "CREATE INDEX marks_session ON marks(session_id);",
]
"""Ordered schema migrations; never edit one that shipped, append a new one."""


def render(migration: str, backend: str) -> str:
    """A SQL migration in ``backend``'s words."""
    return migration.format(real="DOUBLE PRECISION" if backend == "postgresql" else "REAL")
