"""What a session store is: the ``SessionStore`` protocol and the records it keeps.

A session is one ``Conversation`` (per-adapter views, pending summaries, turn
records) plus what the client never sees but an operator needs: the HCP digest
of every turn, route decisions, tool calls and results, usage, and the ids of
the responses handed out with their chain.

Several server replicas may share one store. Three rules keep them apart:

- a turn in flight holds the conversation's **lease** (``acquire`` / ``renew`` /
  ``release``); a lease whose holder died expires, and the replica that takes it
  over marks the dead holder's running turn ``interrupted``;
- every ``save`` names the **revision** it started from and moves it on by one
  (compare-and-set), so a replica that lost its lease cannot overwrite a newer
  state;
- responses are **immutable** rows chained by their previous id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from mol.runtime.views import Conversation, TurnRecord

STORE_ENV = "MOL_SESSION_STORE"
"""Overrides the artifact's ``[session] store`` (a store URL or a plain SQLite path)."""

LEASE_SEC = 15.0
"""Default life of a lease; holders renew it every third of that while the turn runs."""


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
    """Where conversations live between requests, across restarts and across replicas."""

    location: str
    """Where the store is, for messages (a path, or a URL without its password)."""
    interrupted: list[tuple[str, int]]
    """Turns found left running by a dead process when the store opened (session, index)."""

    async def load(self, session_id: str) -> Conversation:
        """The stored conversation; ``SessionNotFound`` if there is none."""
        ...

    async def save(self, conversation: Conversation, record: TurnRecord | None,
                   log: TurnLog | None = None, parent: str | None = None, *,
                   durable: bool = True, turns: bool = True) -> None:
        """Persist the conversation state and ``record`` (every turn when None; no turn row
        when ``turns`` is false: the state alone) in one transaction,
        moving ``conversation.revision`` on by one; ``SessionConflict`` when the stored
        revision is not the one the conversation was loaded at. ``parent``: the
        session this one was forked from. ``durable=False``: the commit survives the
        process being killed but may be lost with the machine (no flush to disk), until
        the next durable commit, which flushes it too."""
        ...

    async def put_mark(self, key: str, session_id: str, mark: dict[str, Any],
                       response: tuple[str | None, dict[str, Any]] | None = None,
                       aliases: tuple[str, ...] = ()) -> None:
        """Name a point of a session by ``key`` and ``aliases`` (see
        ``mol.server.turns.marks``), optionally with the Responses API object stored under
        ``key`` (stored once, never replaced), all in one transaction."""
        ...

    async def get_mark(self, key: str) -> tuple[str, dict[str, Any]] | None:
        """``(session_id, mark)`` for a key, or None."""
        ...

    async def move_marks(self, session_id: str, old: dict[str, Any],
                         new: dict[str, Any]) -> int:
        """Every key naming the point ``old`` of the session names ``new`` instead (a turn
        that waited for a person went on); how many moved."""
        ...

    async def asking(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Per session whose last turn waits: its calls left open for a person's answer
        (``Conversation.asked``, those not ended), when it has any."""
        ...

    async def get_response(self, response_id: str) -> dict[str, Any] | None:
        """A stored Responses API object, or None."""
        ...

    async def delete_response(self, response_id: str) -> bool:
        """Forget a stored Responses API object and the mark named by its id (it can no
        longer be read nor continued); False when there was none."""
        ...

    async def acquire(self, session_id: str, owner: str, ttl: float = LEASE_SEC) -> list[int]:
        """Take the lease of a session for ``owner``; ``SessionBusy`` while another live
        holder has it. Taking over an expired lease (or one of a dead local process) marks
        that holder's running turns interrupted; their indices are returned."""
        ...

    async def renew(self, session_id: str, owner: str, ttl: float = LEASE_SEC) -> bool:
        """Extend ``owner``'s lease; False when it was lost (taken over)."""
        ...

    async def release(self, session_id: str, owner: str) -> None:
        """Give the lease back (a no-op when ``owner`` no longer holds it)."""
        ...

    async def sessions(self, limit: int = 50) -> list[SessionInfo]:
        """The most recently updated sessions, newest first."""
        ...

    async def turn_logs(self, session_id: str) -> list[dict[str, Any]]:
        """Per turn: the HCP digest, usage and recorded events."""
        ...

    async def __aenter__(self) -> SessionStore: ...

    async def __aexit__(self, *exc: object) -> None: ...
