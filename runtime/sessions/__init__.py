"""Durable sessions: the ``SessionStore`` protocol, its SQLite and PostgreSQL stores.

``open_store(url)`` opens the store a URL names: ``sqlite:///PATH`` (or a plain
path) for the embedded default, ``postgresql://...`` for a database several
server replicas share. ``held(store, session_id)`` holds a session's lease for
the length of a turn, renewing it in the background. See docs/sessions.md.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from mol.core.errors import SessionError
from mol.runtime.sessions.base import (
    LEASE_SEC,
    STORE_ENV,
    SessionInfo,
    SessionStore,
    TurnLog,
)
from mol.runtime.sessions.schema import MIGRATIONS
from mol.runtime.sessions.sqlite import SQLiteSessionStore
from mol.runtime.sessions.sqlstore import new_owner

__all__ = ["LEASE_SEC", "MIGRATIONS", "STORE_ENV", "SQLiteSessionStore", "SessionInfo",
           "SessionStore", "TurnLog", "held", "new_owner", "open_store", "store_path",
           "store_url_for"]

_POSTGRES = ("postgresql://", "postgres://")


def store_path(url: str) -> Path:
    """The database file of a SQLite store URL: ``sqlite:///PATH`` (``~`` expanded) or a
    plain path."""
    if url.startswith("sqlite:///"):
        url = url[len("sqlite:///"):]  # as in SQLAlchemy: sqlite:////abs, sqlite:///rel
    elif "://" in url:
        raise SessionError(f"unsupported session store {url!r}: use sqlite:///PATH or "
                           "postgresql://USER@HOST/DB")
    return Path(os.path.expanduser(url))


def store_url_for(artifact: Any) -> str:
    """``$MOL_SESSION_STORE``, else the artifact's ``[session] store``."""
    return os.environ.get(STORE_ENV) or artifact.doc.session.store


def open_store(url: str) -> SessionStore:
    """The store ``url`` names, opened (migrated, recovered)."""
    if url.startswith(_POSTGRES):
        from mol.runtime.sessions.postgres import PostgresSessionStore

        return PostgresSessionStore(url)
    return SQLiteSessionStore(store_path(url))


@asynccontextmanager
async def held(store: SessionStore, session_id: str, owner: str,
               ttl: float = LEASE_SEC) -> AsyncIterator[list[int]]:
    """Hold ``session_id``'s lease while the block runs (renewed every third of ``ttl``),
    and give it back after; yields the turns found interrupted by a takeover. A lost
    lease is not renewed again: the block's next save then fails its compare-and-set."""
    taken_over = await store.acquire(session_id, owner, ttl)

    async def renew() -> None:
        while True:
            await anyio.sleep(ttl / 3)
            if not await store.renew(session_id, owner, ttl):
                return

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(renew)
            try:
                yield taken_over
            finally:
                group.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await store.release(session_id, owner)
