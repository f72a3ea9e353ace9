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
``queue_wait``) is a 429 with ``Retry-After``. A turn gives its slot back when its
reply is complete; the summary hop and the last checkpoints then run under a
background slot of their own (as many), so they never hold up new turns, and a
shortage of them pushes back on admission instead of piling up.

A turn started with a ``handle`` (a response id) can be cancelled until its reply
is complete: the harness marks it interrupted at a consistent point.

A turn whose MCP server elicits input from a client that opted in
(``mol.server.turns.elicitation``) ends its reply with that request and waits,
holding its lease but no slot; the request answering it becomes the next job of
the turn (``Job.chain``): the rest of the turn's events, its outcome and its
marks go to the jobs of the chain.
"""

from __future__ import annotations

import logging
import math
from collections import OrderedDict
from contextlib import AsyncExitStack
from typing import Any

import anyio
from anyio.abc import TaskGroup

from mol.core import events as ev
from mol.core.errors import (
    ConversationError,
    EngineError,
    MolError,
    SessionConflict,
)
from mol.core.tools import Resources
from mol.runtime.harness import Harness, TurnResult
from mol.runtime.recorder import Recorder
from mol.runtime.sessions import LEASE_SEC, SessionStore, TurnLog
from mol.runtime.views import Conversation
from mol.server.http.errors import ApiError, engine_error
from mol.server.turns.admission import Admission
from mol.server.turns.elicitation import WAIT, Elicitations, opted_in
from mol.server.turns.jobs import DELIVERY_WAIT, Job, JobItem, TurnCancelled, TurnRequest
from mol.server.turns.leases import Leases, conflict
from mol.server.turns.marks import abandon_waiting, continues_in_place, fork, mark_of
from mol.server.turns.seeding import check_results, seed, waiting_calls

log = logging.getLogger("mol.server")

OPEN_RESOURCES = 32
"""Conversations whose resources (sandboxes) stay open between their turns. Only idle ones
are closed to keep to it: a conversation whose turn is running keeps its resources, so at
most ``max(OPEN_RESOURCES, max_turns)`` are open at once."""


class Runner:
    """Runs turns for the server against a base harness (plugins, toolsets, engine)."""

    def __init__(self, base: Harness, store: SessionStore, *, max_turns: int,
                 deadline: float, drain: float, lease: float = LEASE_SEC, queue: int = 0,
                 queue_wait: float = 30.0, metrics: Any = None,
                 elicit_wait: float = WAIT) -> None:
        self.base = base
        self.store = store
        self.max_turns = max_turns
        self.deadline = deadline
        self.drain = drain
        self.admission = Admission(max_turns, queue, queue_wait)
        self._background = anyio.CapacityLimiter(max_turns)
        """Summary hops and last checkpoints of turns whose reply is complete."""
        self.metrics = metrics
        """Counts what turns do (``mol.server.http.metrics.Metrics``), when given."""
        self._handles: dict[str, Job] = {}
        self._named: dict[str, Job] = {}
        """Keys named while their turn runs (rewritten when it ends), by key."""
        self.active = 0
        self._idle = anyio.Event()
        self._idle.set()
        self._group: TaskGroup | None = None
        self._stack = AsyncExitStack()
        self.leases = Leases(store, lease)
        """The conversations this replica's turns hold (``mol.server.turns.leases``)."""
        self._resources: OrderedDict[str, Resources] = OrderedDict()
        self._in_use: dict[str, int] = {}
        """Turns running per conversation: their resources are never closed."""
        self.elicitations = Elicitations(self._hand_over, elicit_wait)
        """Turns suspended on an MCP server's request for input, waiting for their client."""

    async def __aenter__(self) -> Runner:
        async with AsyncExitStack() as stack:
            stack.push_async_callback(self._close_resources)  # after the turns ended
            self._group = await stack.enter_async_context(anyio.create_task_group())
            self._group.start_soon(self.leases.renew_forever)
            self._stack = stack.pop_all()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        """Drain: turns in flight get ``drain`` seconds, then are cancelled (and marked
        interrupted by the harness's shielded checkpoint); suspended elicitations are
        cancelled first."""
        self.elicitations.close()
        with anyio.move_on_after(self.drain):
            await self._idle.wait()
        assert self._group is not None
        self._group.cancel_scope.cancel()
        await self._stack.aclose()

    async def _close_resources(self) -> None:
        for resources in self._resources.values():
            await resources.aclose()

    async def start(self, request: TurnRequest) -> Job:
        """Start a turn once a slot is free (waiting in line for one); 429 when the line is
        full or the wait runs out. A request answering a suspended elicitation goes on
        with that turn (``mol.server.turns.elicitation``)."""
        request.client_tools, request.elicit = opted_in(request.client_tools)
        answering = self.elicitations.claim(request)
        await self.admission.enter()
        send, receive = anyio.create_memory_object_stream[JobItem](math.inf)
        job = Job(request, send, receive)
        if answering is not None:
            try:
                self.elicitations.resume(*answering, job)
            except ApiError:
                self.admission.leave()
                raise
        if request.handle is not None:
            self._handles[request.handle] = job
        if answering is not None:
            return job
        self.active += 1
        self._idle = anyio.Event()
        assert self._group is not None
        self._group.start_soon(self._run, job)
        return job

    def cancel(self, handle: str) -> Job | None:
        """Cancel the turn started with ``handle`` while its reply is not complete; its
        job, or None when there is none (replied already, or never started)."""
        job = self._handles.pop(handle, None)
        if job is not None:
            job.scope.cancel()
        return job

    def forget(self, key: str) -> None:
        """Do not rewrite ``key`` when its turn ends (a response deleted meanwhile)."""
        job = self._named.pop(key, None)
        if job is not None and key in job.keys:
            job.keys.remove(key)

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

    async def _replied(self, job: Job) -> None:
        """The reply is complete: trade the turn slot for a background slot."""
        if job.replied:
            return
        await self._background.acquire_on_behalf_of(job)
        job.replied = True
        self._leave(job)

    async def name(self, job: Job, key: str, response: Any = None,
                   aliases: tuple[str, ...] = ()) -> None:
        """Name the point where ``job`` ends by ``key`` and ``aliases`` (with ``response``:
        the Responses API object ``(previous id, body)`` stored under ``key``, in the same
        transaction). Named before the turn finished (a reply ends before the summary hop),
        the mark is written at once and rewritten when the turn ends; a request continuing
        from it meanwhile waits for the conversation's lock, then reads the final mark."""
        if not job.request.persist:
            return
        if job.mark is not None:
            await self.store.put_mark(key, job.session_id, job.mark, response, aliases)
            return
        job.keys += [key, *aliases]
        self._named.update(dict.fromkeys([key, *aliases], job))
        assert job.conversation is not None
        await self.store.put_mark(key, job.session_id, mark_of(job.conversation), response,
                                  aliases)
        if job.mark is not None:  # the turn ended meanwhile: the final mark wins
            await self.store.put_mark(key, job.session_id, job.mark, None, aliases)

    # -- running a turn ---------------------------------------------------------------------

    async def _run(self, job: Job) -> None:
        request = job.request
        held: list[str] = []
        try:
            with job.scope, anyio.fail_after(self.deadline) as job.limit:
                conversation = await self._conversation(request, held)
                job.session_id, job.conversation = conversation.id, conversation
                result = await self._turn(conversation, request, job)
                mark = mark_of(conversation)
                for each in job.chain():  # the requests the turn answered, in order
                    each.mark = mark
                    for key in list(each.keys):
                        if key in each.keys:  # not forgotten meanwhile
                            await self.store.put_mark(key, conversation.id, mark)
            job.current().put(TurnCancelled() if job.scope.cancelled_caught else result)
        except ApiError as exc:
            job.current().put(exc)
        except SessionConflict as exc:
            job.current().put(conflict(exc))
        except TimeoutError:
            job.current().put(ApiError(504, f"the turn exceeded the server's deadline of "
                                       f"{self.deadline:g} s", code="deadline"))
        except EngineError as exc:
            if self.metrics is not None:
                self.metrics.engine_error(exc)
            job.current().put(engine_error(exc))
        except ConversationError as exc:
            job.current().put(ApiError(400, str(exc), param=request.where))
        except MolError as exc:
            log.warning("turn failed: %s", exc)
            job.current().put(ApiError(500, str(exc)))
        except Exception as exc:
            log.exception("turn failed")
            job.current().put(ApiError(500, f"internal error: {type(exc).__name__}"))
        finally:
            await self._end(job, held)

    async def _end(self, job: Job, held: list[str]) -> None:
        jobs = job.chain()
        for key in [key for each in jobs for key in each.keys]:
            self._named.pop(key, None)
        try:
            for session_id in held:
                await self.leases.give(session_id)
        finally:
            for each in jobs:
                each.send.close()
                if each.replied:
                    self._background.release_on_behalf_of(each)
                elif not each.handed:
                    self._leave(each)
            self.active -= 1
            if self.active == 0:
                self._idle.set()

    async def _turn(self, conversation: Conversation, request: TurnRequest,
                    job: Job) -> TurnResult:
        self._in_use[conversation.id] = self._in_use.get(conversation.id, 0) + 1
        try:
            return await self._turn_using(conversation, request, job,
                                          await self._resources_for(conversation.id))
        finally:
            self._in_use[conversation.id] -= 1
            if not self._in_use[conversation.id]:
                del self._in_use[conversation.id]
            await self._close_idle()

    async def _turn_using(self, conversation: Conversation, request: TurnRequest, job: Job,
                          resources: Resources) -> TurnResult:
        base = self.base
        # The marks, written durably before the reply (``name``) and after the turn
        # (``_run``), flush the checkpoints before them: one flush to disk before a reply.
        recorder = Recorder(self.store, base.artifact.digest, flush=False)
        harness = Harness(
            base.artifact, engine=base.engine, plugins=base.plugins, toolsets=base.toolsets,
            conversation=conversation, approve=None,
            checkpoint=recorder.checkpoint if request.persist else None,
            resources=resources, sandbox_pool=base.sandbox_pool,
            session_started=bool(conversation.turns), elicit=self.elicitations.asker(job))

        meter = self.metrics.turn() if self.metrics is not None else None

        async def forward(event: ev.Event) -> None:
            if meter is not None:
                meter(event)
            if isinstance(event, ev.RouteDecided):
                job.route = event
            job.current().put(event)
            if isinstance(event, ev.Answered | ev.ClientToolsRequested):
                replying = job.current()
                await self._replied(replying)
                with anyio.move_on_after(DELIVERY_WAIT):  # the reply's end goes out first
                    await replying.delivered.wait()

        on_event = recorder.observe(forward)
        if request.tool_results is not None:
            return await harness.submit_tool_results(
                request.tool_results, on_event=on_event, client_tools=request.client_tools,
                stream=request.stream, params=request.params)
        assert request.text is not None
        abandoned = abandon_waiting(conversation)
        if abandoned is not None and request.persist:
            await recorder.checkpoint(conversation, abandoned)
        return await harness.turn(request.text, adapter=request.adapter, on_event=on_event,
                                  client_tools=request.client_tools, stream=request.stream,
                                  params=request.params)

    async def _conversation(self, request: TurnRequest, held: list[str]) -> Conversation:
        """The conversation a request continues (in place or forked), or a new one; tool
        results must answer exactly the calls its waiting turn left open (400 otherwise)."""
        if request.key is not None:
            found = await self.store.get_mark(request.key)
            if found is not None:
                await self._acquire(found[0], held)
                found = await self.store.get_mark(request.key)  # final once the lock is ours
            if found is not None:
                return await self._continue(found[0], found[1], request, held)
            if request.key_required:
                raise ApiError(404, f"no stored response {request.key!r} to continue "
                               "(unknown, or created with store: false)",
                               param="previous_response_id")
        conversation = Conversation()
        await self._acquire(conversation.id, held)
        if request.seed:
            await self._seed(conversation, request)
            if request.persist:
                await self.store.save(conversation, None, TurnLog(self.base.artifact.digest))
        elif request.tool_results is not None:
            check_results([], request.tool_results, request.result_fields, request.where)
        return conversation

    async def _continue(self, session_id: str, mark: dict[str, Any], request: TurnRequest,
                        held: list[str]) -> Conversation:
        conversation = await self.store.load(session_id)
        if continues_in_place(conversation, mark):
            self._check_results(conversation, request)
            return conversation
        branch = fork(conversation, mark)
        self._check_results(branch, request)
        await self._acquire(branch.id, held)
        if request.persist:
            await self.store.save(branch, None, TurnLog(self.base.artifact.digest),
                                  parent=session_id)
        return branch

    @staticmethod
    def _check_results(conversation: Conversation, request: TurnRequest) -> None:
        if request.tool_results is not None:
            check_results(waiting_calls(conversation), request.tool_results,
                          request.result_fields, request.where)

    async def _seed(self, conversation: Conversation, request: TurnRequest) -> None:
        """Earlier turns the client sent become plain messages after each adapter's own
        system prompt (``mol.server.turns.seeding``)."""
        doc = self.base.artifact.doc
        fields = request.seed_fields or [f"{request.where}[{i}].tool_call_id"
                                         for i in range(len(request.seed))]

        async def prompt(adapter: str) -> str:
            return self.base.system_prompt(adapter, await self.base.tools_for(adapter))

        await seed(conversation, request.seed, fields, request.tool_results,
                   request.result_fields, request.where, doc.adapter_names, doc.adapters,
                   doc.route_fallback, prompt)

    # -- locks and resources ----------------------------------------------------------------

    async def _acquire(self, session_id: str, held: list[str]) -> None:
        self.elicitations.check_free(session_id)
        for other in list(held):
            await self.leases.give(other)
            held.remove(other)
        await self.leases.take(session_id)
        held.append(session_id)

    async def _resources_for(self, session_id: str) -> Resources:
        if session_id in self._resources:
            self._resources.move_to_end(session_id)
            return self._resources[session_id]
        resources = self._resources[session_id] = Resources()
        await self._close_idle()
        return resources

    async def _close_idle(self) -> None:
        """Close the least recently used idle conversations' resources beyond
        ``OPEN_RESOURCES``; never those of a conversation with a turn running."""
        while len(self._resources) > OPEN_RESOURCES:
            oldest = next((key for key in self._resources if key not in self._in_use), None)
            if oldest is None:
                return
            closing = self._resources.pop(oldest)
            with anyio.CancelScope(shield=True):  # popped: nobody else would close it
                await closing.aclose()

