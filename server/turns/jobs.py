"""What a request asks the runner for (``TurnRequest``) and what it gets back (``Job``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from mol.core import events as ev
from mol.runtime.harness import TurnResult
from mol.runtime.views import Conversation
from mol.server.http.errors import ApiError

__all__ = ["DELIVERY_WAIT", "KEEPALIVE", "Job", "JobItem", "KeepAlive", "TurnCancelled", "TurnRequest"]


@dataclass
class TurnRequest:
    """What a request asks the runner to do."""

    text: str | None = None
    """A new user turn, or None when ``tool_results`` continue a waiting turn."""
    tool_results: dict[str, str] | None = None
    result_fields: dict[str, str] = field(default_factory=dict)
    """Call id -> the request field holding it, for errors (``input[4].call_id``)."""
    where: str = "messages"
    """The request field holding the messages (``messages``, ``input``)."""
    key: str | None = None
    """The mark to continue from (a response id or a transcript fingerprint)."""
    key_required: bool = False
    """404 when ``key`` names no stored point (``previous_response_id``)."""
    seed: list[dict[str, Any]] = field(default_factory=list)
    """History for a conversation the server does not have: plain messages in every view."""
    seed_fields: list[str] = field(default_factory=list)
    """Per seed message, the request field of its call id (default ``messages[i]...``)."""
    adapter: str | None = None
    """Skip routing: the client named this adapter."""
    client_tools: list[dict[str, Any]] | None = None
    stream: bool = False
    persist: bool = True
    params: dict[str, Any] = field(default_factory=dict)
    """The client's sampling parameters for the answer hop (``mol.server.api.params``)."""
    handle: str | None = None
    """A name to cancel the turn by while its reply is not complete (a response id)."""
    elicit: bool = False
    """The client declared the ``mcp_elicitation`` tool: MCP servers' requests for input
    reach it (``mol.server.turns.elicitation``)."""


class TurnCancelled(ApiError):
    """The outcome of a turn cancelled by its handle (``Runner.cancel``)."""

    def __init__(self) -> None:
        super().__init__(409, "the response was cancelled before it completed",
                         code="cancelled")


class KeepAlive:
    """Nothing happened for a while (a streamed reply sends an SSE comment)."""


KEEPALIVE = KeepAlive()

DELIVERY_WAIT = 2.0
"""Seconds a turn whose reply is complete waits for it to be delivered before its
bookkeeping goes on regardless (a slow or absent reader must not hold it up)."""

JobItem = ev.Event | TurnResult | ApiError
"""What a job's stream carries, typed end to end: events, then how the turn ended."""


@dataclass(eq=False)
class Job:
    """One turn in flight: its events, and the point it ends at."""

    request: TurnRequest
    send: Any
    receive: Any
    keys: list[str] = field(default_factory=list)
    session_id: str = ""
    conversation: Conversation | None = None
    mark: dict[str, Any] | None = None
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    """Cancelled by ``Runner.cancel``."""
    replied: bool = False
    """The reply is complete: the turn slot went back, a background slot is held."""
    delivered: anyio.Event = field(default_factory=anyio.Event)
    """The reply's last byte was handed to the client (or the client went away): the turn's
    bookkeeping after the reply (summary hop, checkpoints) waits for it, bounded by
    ``DELIVERY_WAIT``, so it never competes with the reply's end for the CPU."""
    render: Callable[[str], dict[str, Any]] | None = None
    """The reply's object in a given status (a Responses object), for ``cancel``."""
    handed: bool = False
    """The reply ended with an elicitation: the turn waits for the client's answer, and
    this job holds no slot."""
    next: Job | None = None
    """The job of the request that answered that elicitation: the turn goes on in it."""
    route: ev.RouteDecided | None = None
    """The turn's last route decision (told again to the job it goes on in)."""
    limit: anyio.CancelScope | None = None
    """The turn's deadline (waits for elicitation answers do not count against it)."""

    def chain(self) -> list[Job]:
        """This job and the jobs its turn went on in, in order."""
        jobs = [self]
        while jobs[-1].next is not None:
            jobs.append(jobs[-1].next)  # type: ignore[arg-type]
        return jobs

    def current(self) -> Job:
        """The job the turn's events go to now (the last of ``chain``; no list is built:
        this runs for every event of a turn)."""
        job = self
        while job.next is not None:
            job = job.next
        return job

    def put(self, item: JobItem) -> None:
        """Pass ``item`` to the reply reading this job (dropped when it went away)."""
        try:
            self.send.send_nowait(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the client went away; the turn still completes and is stored

    async def outcomes(self, keepalive: float | None = None
                       ) -> AsyncIterator[JobItem | KeepAlive]:
        """The turn's ``Event``s as they happen, then its ``TurnResult`` or an ``ApiError``;
        with ``keepalive``, a ``KEEPALIVE`` whenever that many seconds pass without one."""
        async with self.receive:
            while True:
                with anyio.move_on_after(keepalive) as waited:
                    try:
                        item = await self.receive.receive()
                    except anyio.EndOfStream:
                        return
                if waited.cancelled_caught:
                    yield KEEPALIVE
                    continue
                yield item
