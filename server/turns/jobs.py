"""What a request asks the runner for (``TurnRequest``) and what it gets back (``Job``).

A job is what the turn room hands the API room: the turn's events and outcome to read
(``outcomes``), and where to say the reply ends (``ends_at``), which the turn room writes
as a mark. The API room never calls the runner for either.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from mol.core import events as ev
from mol.core.tools import Approval
from mol.runtime import Conversation, TurnResult

__all__ = ["DELIVERY_WAIT", "KEEPALIVE", "Flight", "Job", "JobItem", "KeepAlive", "TurnRequest",
           "opted_in"]


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
    conversation: str | None = None
    """The stored conversation a client-chosen id names (Chat Completions'
    ``X-Conversation-Id``): continued in place whatever ``key`` says, or made under this id
    (seeded with ``seed``) when the store has none."""
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
    approve: str = ""
    """How the client answers calls of ``ask`` tools (``mol.server.turns.approvals``):
    ``items`` (the Responses API's approval items), ``tool`` (it declared the
    ``mol_approval`` tool), or nobody (empty: such calls are refused)."""
    approval_answers: set[str] = field(default_factory=set)
    """Call ids the request answers with approval items (``mcp_approval_response``): each
    must answer an approval request."""
    approvals: dict[str, Approval] = field(default_factory=dict)
    """The person's answers among ``tool_results``, once the turn room read them."""
    expire: str | None = None
    """Deny what this stored conversation's waiting approvals got no answer to in time
    (a turn the runner starts itself, with no client)."""
    compact: bool = False
    """Compact the conversation's views instead of running a turn."""
    compact_at: int | None = None
    """Compact a view whose request would take more tokens than this (the client's
    ``context_management``), besides the artifact's threshold."""
    follows: Job | None = None
    """Continue where this job's turn ended instead of from a stored point: a response its
    client's connection keeps in memory only (``store: false`` on a WebSocket)."""

    def content_field(self, call_id: str) -> str:
        """The request field holding the content of the result for ``call_id``
        (``input[2].output``, ``messages[3].content``), for errors about it."""
        where = self.result_fields.get(call_id, self.where)
        base, _, name = where.rpartition(".")
        if name == "call_id":
            return f"{base}.output"
        return f"{base}.content" if name == "tool_call_id" else where


def opted_in(tools: list[dict[str, Any]] | None, names: tuple[str, ...]
             ) -> tuple[list[dict[str, Any]] | None, set[str]]:
    """The client's tools without the function tools ``names`` a client declares to opt in
    to a request of mol's (``mcp_elicitation``, ``mol_approval``), and which it declared:
    the model never sees those."""
    if not tools:
        return tools, set()
    declared = {(t.get("function") or {}).get("name") for t in tools} & set(names)
    return [t for t in tools if (t.get("function") or {}).get("name") not in names], declared


class KeepAlive:
    """Nothing happened for a while (a streamed reply sends an SSE comment)."""


KEEPALIVE = KeepAlive()

DELIVERY_WAIT = 2.0
"""Seconds a turn whose reply is complete waits for it to be delivered before its
bookkeeping goes on regardless (a slow or absent reader must not hold it up)."""

JobItem = ev.Event | TurnResult | Exception
"""What a job's stream carries, typed end to end: events, then how the turn ended (its
result, or what it raised: a ``MolError``, which the HTTP room maps to a status)."""


@dataclass(eq=False)
class Flight:
    """The turn in flight, shared by the jobs of its chain (the request that started it and
    those answering its requests for input)."""

    names: Any = None
    """The runner's ``Names``: where the marks of ``Job.ends_at`` go."""
    admission: Any = None
    """The runner's ``Admission``: a replied job trades its turn slot there."""
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    """Cancelled by ``Runner.cancel``."""
    limit: anyio.CancelScope | None = None
    """The turn's deadline (waits for elicitation answers do not count against it)."""
    session_id: str = ""
    conversation: Conversation | None = None
    session: Any = None
    """The runtime ``Session`` running the turn."""
    route: ev.RouteDecided | None = None
    """The turn's last route decision (told again to the job it goes on in)."""
    asking: anyio.Lock = field(default_factory=anyio.Lock)
    """Held while the turn asks its client for input (one request for input at a time)."""
    resumed_from: dict[str, Any] | None = None
    """The point where the turn waited for a person's approvals, when it went on from there:
    the names of that point name the turn's end (``mol.server.turns.marks.Names.settle``)."""
    trace: Any = None
    """The span current where the turn's request was made (its request's span, when
    tracing is on): the turn's span is its child (``mol.core.tracing``)."""


@dataclass(eq=False)
class Job:
    """One request's part of a turn: the events its reply reads, and where the reply ends."""

    request: TurnRequest
    send: Any
    receive: Any
    flight: Flight
    """The turn this job is part of."""
    keys: list[str] = field(default_factory=list)
    """The names the reply gave the point it ends at (``ends_at``)."""
    mark: dict[str, Any] | None = None
    """The turn's final point, once it ended."""
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
    usage_base: ev.TurnUsage = field(default_factory=ev.TurnUsage)
    """The turn's usage when this job's part of it began (an elicitation's answer)."""
    usage: ev.TurnUsage | None = None
    """What this job's part of the turn used, up to its outcome (set with the outcome)."""

    async def ends_at(self, key: str, response: Any = None,
                      aliases: tuple[str, ...] = ()) -> None:
        """Say that this job's reply ends at the point named ``key`` (and ``aliases``); with
        ``response``, the Responses API object ``(previous id, body)`` stored under ``key``
        with it (``mol.server.turns.marks``)."""
        await self.flight.names.name(self, key, response, aliases)

    async def observe(self, event: ev.Event) -> None:
        """The observer of this job's turn (a session observer, on the chain's first job):
        pass ``event`` to the job the turn answers now. After the outcome, the job trades
        its turn slot for a background slot, and the turn goes on (summary hop,
        checkpoints) once the reply went out, or after ``DELIVERY_WAIT``."""
        flight = self.flight
        if isinstance(event, ev.RouteDecided):
            flight.route = event
        job = self.current()
        outcome = isinstance(event, ev.Answered | ev.ClientToolsRequested)
        if outcome:
            job.usage = flight.session.current.usage.since(job.usage_base)
        job.put(event)
        if outcome:
            if not job.replied:
                await flight.admission.replied(job)
                job.replied = True
            with anyio.move_on_after(DELIVERY_WAIT):  # the reply's end goes out first
                await job.delivered.wait()

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
        """The turn's ``Event``s as they happen, then its ``TurnResult`` or an exception;
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
