"""Turns of the server: run in the background, one at a time per conversation.

A request hands the ``Runner`` a ``TurnRequest`` and reads the turn's events
from its ``Job``. The turn runs in the runner's task group, not the request's
task, so a streamed reply can end as soon as the answer is known while the
summary hop and the last checkpoint finish behind it (the conversation stays
locked until then, so a quick follow-up request waits for it instead of
missing it: its mark is written as soon as the answer is known). They start once the
reply's last byte went out (``Job.delivered``), so they never compete with its end.

Admission (``mol.server.turns.admission``): ``max_turns`` turns hold a slot at
once, more wait in a bounded FIFO queue, and only a full queue (or a wait past
``queue_wait``) is ``Overloaded`` (a 429 with ``Retry-After``). A turn gives its slot back when its
reply is complete; the summary hop and the last checkpoints then run under a
background slot of their own (as many), so they never hold up new turns, and a
shortage of them pushes back on admission instead of piling up.

A turn started with a ``handle`` (a response id) can be cancelled until its reply
is complete: the session marks it interrupted at a consistent point.

A turn whose MCP server elicits input from a client that opted in
(``mol.server.turns.elicitation``) ends its reply with that request and waits,
holding its lease but no slot; the request answering it becomes the next job of
the turn (``Job.chain``): the rest of the turn's events, its outcome and its
marks go to the jobs of the chain. A call of an ``ask`` tool whose client answers
approvals (``mol.server.turns.approvals``) ends the turn itself, stored and waiting; the
request answering it continues the conversation from the store like any tool results, and
what nobody answers in time is denied by a turn the runner starts itself (``_expire``).

A conversation whose turns leave deferred summaries open has them written once it has been
quiet for ``[summary] idle_after`` seconds (``mol.server.turns.idle``).

Each turn is a runtime ``Session`` on the stored conversation; the runner is one of its
observers (``_forward`` passes the events to the job the turn answers now), the metrics
another. What a turn raises is put in its job as it is: the HTTP room maps it.
"""

from __future__ import annotations

import logging
import math
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from typing import Any

import anyio
from anyio.abc import TaskGroup

from mol.core import tracing
from mol.core.errors import (
    ConversationError,
    EngineError,
    MolError,
    SessionError,
    TurnCancelled,
    TurnDeadline,
    TurnError,
)
from mol.core.tools import LATER, Later, Resources
from mol.runtime import (
    LEASE_SEC,
    Conversation,
    Recorder,
    Runtime,
    Session,
    SessionStore,
    TurnResult,
)
from mol.server.turns import approvals, elicitation
from mol.server.turns.admission import Admission
from mol.server.turns.continuing import Continuing
from mol.server.turns.elicitation import WAIT, Elicitations
from mol.server.turns.idle import Idle
from mol.server.turns.jobs import Flight, Job, JobItem, TurnRequest, opted_in
from mol.server.turns.leases import Leases
from mol.server.turns.marks import Names, abandon_waiting, mark_of

log = logging.getLogger("mol.server")

OPEN_RESOURCES = 32
"""Conversations whose resources (sandboxes) stay open between their turns: only idle ones
are closed to keep to it, least recently used first, so at most ``max(OPEN_RESOURCES,
turns running)`` are open at once."""


class OpenResources:
    """Each conversation's ``Resources``, the least recently used idle ones closed first."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = OPEN_RESOURCES if limit is None else limit
        self._open: OrderedDict[str, Resources] = OrderedDict()
        self._in_use: dict[str, int] = {}
        """Turns running per conversation: their resources are never closed."""

    @asynccontextmanager
    async def using(self, session_id: str) -> AsyncIterator[Resources]:
        """The resources of ``session_id`` for one turn (opened if need be), kept open
        after it within the limit."""
        self._in_use[session_id] = self._in_use.get(session_id, 0) + 1
        try:
            if session_id in self._open:
                self._open.move_to_end(session_id)
            else:
                self._open[session_id] = Resources()
                await self._close_idle()
            yield self._open[session_id]
        finally:
            self._in_use[session_id] -= 1
            if not self._in_use[session_id]:
                del self._in_use[session_id]
            await self._close_idle()

    async def _close_idle(self) -> None:
        while len(self._open) > self.limit:
            oldest = next((key for key in self._open if key not in self._in_use), None)
            if oldest is None:
                return
            closing = self._open.pop(oldest)
            with anyio.CancelScope(shield=True):  # popped: nobody else would close it
                await closing.aclose()

    async def aclose(self) -> None:
        """Close every conversation's resources (the server stops)."""
        while self._open:
            _, resources = self._open.popitem(last=False)
            await resources.aclose()


class Runner:
    """Runs turns for the server on a runtime (plugins, toolsets, engine)."""

    def __init__(self, runtime: Runtime, store: SessionStore, *, max_turns: int,
                 deadline: float, drain: float, lease: float = LEASE_SEC, queue: int = 0,
                 queue_wait: float = 30.0, metrics: Any = None,
                 elicit_wait: float = WAIT) -> None:
        self.runtime = runtime
        self.store = store
        self.max_turns = max_turns
        self.deadline = deadline
        self.drain = drain
        self.admission = Admission(max_turns, queue, queue_wait)
        self.metrics = metrics
        """Counts what turns do (``mol.server.http.metrics.Metrics``), when given."""
        self._handles: dict[str, Job] = {}
        self.active = 0
        self._idle = anyio.Event()
        self._idle.set()
        self._group: TaskGroup | None = None
        self._stack = AsyncExitStack()
        self.leases = Leases(store, lease)
        """The conversations this replica's turns hold (``mol.server.turns.leases``)."""
        self.names = Names(store)
        """Where replies end (``mol.server.turns.marks``)."""
        self.resources = OpenResources()
        """Conversations' sandboxes kept open between turns."""
        self.elicitations = Elicitations(self._hand_over, elicit_wait)
        """Turns suspended on an MCP server's request for input, waiting for their client."""
        self.approvals = approvals.Approvals(runtime.artifact.doc, self._expire)
        """Stored turns waiting for a person's approvals: checks and timeouts."""
        self.continuing = Continuing(runtime, store, self.leases, self.elicitations,
                                     self.approvals)
        self.idle = Idle(runtime, store, self.leases, deadline, metrics)
        """Conversations gone quiet with deferred summaries open (``mol.server.turns.idle``)."""

    async def __aenter__(self) -> Runner:
        async with AsyncExitStack() as stack:
            stack.push_async_callback(self.resources.aclose)  # after the turns ended
            self._group = await stack.enter_async_context(anyio.create_task_group())
            self._group.start_soon(self.leases.renew_forever)
            self._group.start_soon(self.approvals.run, self._group)
            self._group.start_soon(self._waits_stored)
            self._stack = stack.pop_all()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        """Drain: turns in flight get ``drain`` seconds, then are cancelled (and marked
        interrupted by the session's shielded checkpoint); suspended elicitations are
        cancelled first."""
        self.elicitations.close()
        with anyio.move_on_after(self.drain):
            await self._idle.wait()
        assert self._group is not None
        self._group.cancel_scope.cancel()
        await self._stack.aclose()

    async def start(self, request: TurnRequest) -> Job:
        """Start a turn once a slot is free (waiting in line for one); ``Overloaded`` when
        the line is full or the wait runs out. A request answering a suspended elicitation
        goes on with that turn (``mol.server.turns.elicitation``)."""
        if request.client_tools:
            request.client_tools, declared = opted_in(request.client_tools,
                                                      (elicitation.TOOL, approvals.TOOL))
            request.elicit = elicitation.TOOL in declared
            if approvals.TOOL in declared:
                request.approve = request.approve or "tool"
        answering = self.elicitations.claim(request) if request.tool_results else None
        await self.admission.enter()
        send, receive = anyio.create_memory_object_stream[JobItem](math.inf)
        job = Job(request, send, receive, Flight(names=self.names, admission=self.admission))
        if answering is not None:
            try:
                self.elicitations.resume(*answering, job)
            except MolError:
                self.admission.leave()
                raise
        if request.handle is not None:
            self._handles[request.handle] = job
        if answering is not None:
            return job
        self.active += 1
        self._idle = anyio.Event()
        # The turn runs in the runner's group, whose context is not the request's.
        job.flight.trace = tracing.current()
        assert self._group is not None
        self._group.start_soon(self._run, job)
        return job

    def cancel(self, handle: str) -> Job | None:
        """Cancel the turn started with ``handle`` while its reply is not complete; its
        job, or None when there is none (replied already, or never started)."""
        job = self._handles.pop(handle, None)
        if job is None or job.replied:
            return None
        job.flight.scope.cancel()
        return job

    def forget(self, key: str) -> None:
        """Do not rewrite ``key`` when its turn ends (a response deleted meanwhile)."""
        self.names.forget(key)

    def _hand_over(self, job: Job) -> None:
        """``job``'s reply ends with an elicitation: its turn waits for the client's answer
        holding no turn slot, so that it holds up no other turn."""
        job.handed = True
        self._leave(job)

    def _leave(self, job: Job) -> None:
        """Give ``job``'s turn slot back; it can no longer be cancelled by its handle."""
        self.admission.leave()
        if job.request.handle is not None:
            self._handles.pop(job.request.handle, None)

    # -- running a turn ---------------------------------------------------------------------

    async def _run(self, job: Job) -> None:
        held: list[str] = []
        try:
            flight = job.flight
            with (tracing.within(flight.trace), flight.scope,
                  anyio.fail_after(self.deadline) as flight.limit):
                conversation = await self.continuing.conversation(job.request, held)
                flight.session_id, flight.conversation = conversation.id, conversation
                self.idle.started(conversation.id)
                result = await self._turn(conversation, job)
                await self.names.settle(job.chain(), conversation, flight.resumed_from)
                waits = approvals.waiting(conversation)
                if not waits:
                    self.approvals.disarm(conversation.id)
                elif job.request.persist:
                    self.approvals.arm(conversation.id, waits)
                assert self._group is not None
                self.idle.ended(self._group, conversation, job.request.persist)
            job.current().put(TurnCancelled("the response was cancelled before it completed")
                              if flight.scope.cancelled_caught else result)
        except TimeoutError:
            job.current().put(TurnDeadline(f"the turn exceeded the server's deadline of "
                                           f"{self.deadline:g} s"))
        except EngineError as exc:
            if self.metrics is not None:
                self.metrics.engine_error(exc)
            job.current().put(exc)
        except (ConversationError, SessionError, TurnError) as exc:
            job.current().put(exc)  # the client's doing, or the store's answer to it
        except MolError as exc:
            log.warning("turn failed: %s", exc)
            job.current().put(exc)
        except Exception as exc:
            log.exception("turn failed")
            job.current().put(exc)
        finally:
            await self._end(job, held)

    async def _end(self, job: Job, held: list[str]) -> None:
        jobs = job.chain()
        self.names.drop(jobs)
        try:
            for session_id in held:
                await self.leases.give(session_id)
        finally:
            for each in jobs:
                each.send.close()
                if each.request.handle is not None:
                    self._handles.pop(each.request.handle, None)
                if each.replied:
                    self.admission.finished(each)
                elif not each.handed:
                    self._leave(each)
            self.active -= 1
            if self.active == 0:
                self._idle.set()

    async def _turn(self, conversation: Conversation, job: Job) -> TurnResult:
        request = job.request
        async with self.resources.using(conversation.id) as resources:
            session = self._session(conversation, job, resources)
            if request.compact:
                await session.compact()
                return TurnResult(adapter="", answer="", status="compacted")
            answers = (request.approvals if request.expire is None
                       else self.approvals.expired(conversation))
            if answers:  # the names of the point it waited at move to where it ends
                job.flight.resumed_from = mark_of(conversation)
            elif request.expire is not None:
                return TurnResult(adapter="", answer="", status="unchanged")
            if request.tool_results is not None or answers:
                results = {c: text for c, text in (request.tool_results or {}).items()
                           if c not in answers}
                return await session.submit_tool_results(
                    results, approvals=answers, client_tools=request.client_tools,
                    stream=request.stream, params=request.params)
            assert request.text is not None
            abandoned = abandon_waiting(conversation)
            if abandoned is not None and session.checkpoint is not None:
                await session.checkpoint(conversation, abandoned)
            return await session.turn(request.text, adapter=request.adapter,
                                      client_tools=request.client_tools,
                                      stream=request.stream, params=request.params)

    def _session(self, conversation: Conversation, job: Job, resources: Resources) -> Session:
        """The runtime session of ``job``'s turn: checkpointed into the store (unless the
        request keeps nothing), observed by the metrics and by the job."""
        # The marks, written durably before the reply (``Job.ends_at``) and after the turn
        # (``Names.settle``), flush the checkpoints before them: one flush before a reply.
        recorder = Recorder(self.store, self.runtime.artifact.digest, flush=False)
        observers = [] if self.metrics is None else [self.metrics.turn()]
        session = job.flight.session = self.runtime.session(
            conversation, checkpoint=recorder.checkpoint if job.request.persist else None,
            resources=resources, started=bool(conversation.turns),
            elicit=partial(self.elicitations.ask, job), observers=observers,
            compact_at=job.request.compact_at,
            approve=_later if job.request.approve else None)
        session.observers.append(job.observe)
        return session

    # -- approvals nobody answered ----------------------------------------------------------

    async def _expire(self, session_id: str) -> None:
        """Deny the approvals of ``session_id`` whose wait ended, in a turn without a
        client: the adapter reads the refusals and goes on (its reply goes nowhere; the
        conversation keeps it)."""
        job = await self.start(TurnRequest(expire=session_id))
        job.delivered.set()  # nobody reads it: the turn's end waits for nothing
        async for item in job.outcomes():
            if isinstance(item, Exception):
                raise item

    async def _waits_stored(self) -> None:
        """At start: a timer for every wait the store holds (asked before a restart, or by
        another replica)."""
        try:
            found = await self.store.asking()
        except SessionError as exc:
            log.warning("could not read the approvals waiting in the store: %s", exc)
            return
        for session_id, asked in found.items():
            self.approvals.arm(session_id, asked)


async def _later(call: Any) -> Later:
    """The approver of a turn whose client answers approvals: after the turn."""
    return LATER
