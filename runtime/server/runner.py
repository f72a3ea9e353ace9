"""Turns of the server: run in the background, one at a time per conversation.

A request hands the ``Runner`` a ``TurnRequest`` and reads the turn's events
from its ``Job``. The turn runs in the runner's task group, not the request's
task, so a streamed reply can end as soon as the answer is known while the
summary hop and the last checkpoint finish behind it (the conversation stays
locked until then, so a quick follow-up request waits for it instead of
missing it: its mark is written as soon as the answer is known). Excess turns are refused at once (429 with ``Retry-After``).
"""

from __future__ import annotations

import copy
import logging
import math
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskGroup

from mol.runtime import events as ev
from mol.runtime.errors import ConversationError, EngineError, MolError
from mol.runtime.harness import Harness, TurnResult
from mol.runtime.recorder import Recorder
from mol.runtime.server.http import ApiError, engine_error
from mol.runtime.server.marks import abandon_waiting, continues_in_place, fork, mark_of
from mol.runtime.sessions import SessionStore, TurnLog
from mol.runtime.tools import Resources
from mol.runtime.views import Conversation, TurnRecord

log = logging.getLogger("mol.server")

OPEN_RESOURCES = 32
"""Conversations whose resources (sandboxes) stay open between their turns. Only idle ones
are closed to keep to it: a conversation whose turn is running keeps its resources, so at
most ``max(OPEN_RESOURCES, max_turns)`` are open at once."""


@dataclass
class TurnRequest:
    """What a request asks the runner to do."""

    text: str | None = None
    """A new user turn, or None when ``tool_results`` continue a waiting turn."""
    tool_results: dict[str, str] | None = None
    key: str | None = None
    """The mark to continue from (a response id or a transcript fingerprint)."""
    key_required: bool = False
    """404 when ``key`` names no stored point (``previous_response_id``)."""
    seed: list[dict[str, Any]] = field(default_factory=list)
    """History for a conversation the server does not have: plain messages in every view."""
    adapter: str | None = None
    """Skip routing: the client named this adapter."""
    client_tools: list[dict[str, Any]] | None = None
    stream: bool = False
    persist: bool = True
    params: dict[str, Any] = field(default_factory=dict)
    """The client's sampling parameters for the answer hop (``mol.runtime.server.params``)."""


JobItem = ev.Event | TurnResult | ApiError
"""What a job's stream carries, typed end to end: events, then how the turn ended."""


@dataclass
class Job:
    """One turn in flight: its events, and the point it ends at."""

    request: TurnRequest
    send: Any
    receive: Any
    keys: list[str] = field(default_factory=list)
    session_id: str = ""
    conversation: Conversation | None = None
    mark: dict[str, Any] | None = None

    async def outcomes(self) -> AsyncIterator[JobItem]:
        """The turn's ``Event``s as they happen, then its ``TurnResult`` or an ``ApiError``."""
        async with self.receive:
            async for item in self.receive:
                yield item


class Runner:
    """Runs turns for the server against a base harness (plugins, toolsets, engine)."""

    def __init__(self, base: Harness, store: SessionStore, *, max_turns: int,
                 deadline: float, drain: float) -> None:
        self.base = base
        self.store = store
        self.max_turns = max_turns
        self.deadline = deadline
        self.drain = drain
        self.active = 0
        self._idle = anyio.Event()
        self._idle.set()
        self._group: TaskGroup | None = None
        self._stack = AsyncExitStack()
        self._locks: dict[str, anyio.Lock] = {}
        self._resources: OrderedDict[str, Resources] = OrderedDict()
        self._in_use: dict[str, int] = {}
        """Turns running per conversation: their resources are never closed."""

    async def __aenter__(self) -> Runner:
        async with AsyncExitStack() as stack:
            stack.push_async_callback(self._close_resources)  # after the turns ended
            self._group = await stack.enter_async_context(anyio.create_task_group())
            self._stack = stack.pop_all()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        """Drain: turns in flight get ``drain`` seconds, then are cancelled (and marked
        interrupted by the harness's shielded checkpoint)."""
        with anyio.move_on_after(self.drain):
            await self._idle.wait()
        assert self._group is not None
        self._group.cancel_scope.cancel()
        await self._stack.aclose()

    async def _close_resources(self) -> None:
        for resources in self._resources.values():
            await resources.aclose()

    def start(self, request: TurnRequest) -> Job:
        """Start a turn, or refuse it at once with 429 when ``max_turns`` run already."""
        if self.active >= self.max_turns:
            raise ApiError(429, f"the server is running {self.max_turns} turns, its limit; "
                           "retry shortly", code="too_many_turns", headers={"Retry-After": "1"})
        send, receive = anyio.create_memory_object_stream[JobItem](math.inf)
        job = Job(request, send, receive)
        self.active += 1
        self._idle = anyio.Event()
        assert self._group is not None
        self._group.start_soon(self._run, job)
        return job

    async def name(self, job: Job, key: str, response: Any = None) -> None:
        """Name the point where ``job`` ends by ``key`` (with ``response``: the Responses API
        object ``(previous id, body)`` stored under it, in the same transaction). Named
        before the turn finished (a reply ends before the summary hop), the mark is written
        at once and rewritten when the turn ends; a request continuing from it meanwhile
        waits for the conversation's lock, then reads the final mark."""
        if not job.request.persist:
            return
        if job.mark is not None:
            await self.store.put_mark(key, job.session_id, job.mark, response)
            return
        job.keys.append(key)
        assert job.conversation is not None
        await self.store.put_mark(key, job.session_id, mark_of(job.conversation), response)
        if job.mark is not None:  # the turn ended meanwhile: the final mark wins
            await self.store.put_mark(key, job.session_id, job.mark)

    # -- running a turn ---------------------------------------------------------------------

    async def _run(self, job: Job) -> None:
        request = job.request
        held: list[str] = []
        try:
            with anyio.fail_after(self.deadline):
                conversation = await self._conversation(request, held)
                job.session_id, job.conversation = conversation.id, conversation
                result = await self._turn(conversation, request, job)
                job.mark = mark_of(conversation)
                for key in job.keys:
                    await self.store.put_mark(key, conversation.id, job.mark)
            _send(job, result)
        except ApiError as exc:
            _send(job, exc)
        except TimeoutError:
            _send(job, ApiError(504, f"the turn exceeded the server's deadline of "
                                     f"{self.deadline:g} s", code="deadline"))
        except EngineError as exc:
            _send(job, engine_error(exc))
        except ConversationError as exc:
            _send(job, ApiError(400, str(exc), param="messages"))
        except MolError as exc:
            log.warning("turn failed: %s", exc)
            _send(job, ApiError(500, str(exc)))
        except Exception as exc:
            log.exception("turn failed")
            _send(job, ApiError(500, f"internal error: {type(exc).__name__}"))
        finally:
            for session_id in held:
                self._release(session_id)
            job.send.close()
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
            session_started=bool(conversation.turns))

        def forward(event: ev.Event) -> None:
            _send(job, event)

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
        """The conversation a request continues (in place or forked), or a new one."""
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
        return conversation

    async def _continue(self, session_id: str, mark: dict[str, Any], request: TurnRequest,
                        held: list[str]) -> Conversation:
        conversation = await self.store.load(session_id)
        if continues_in_place(conversation, mark):
            return conversation
        branch = fork(conversation, mark)
        await self._acquire(branch.id, held)
        if request.persist:
            await self.store.save(branch, None, TurnLog(self.base.artifact.digest),
                                  parent=session_id)
        return branch

    async def _seed(self, conversation: Conversation, request: TurnRequest) -> None:
        """Earlier turns the client sent become plain messages after each adapter's own
        system prompt; a trailing client tool call leaves its adapter's turn waiting."""
        doc = self.base.artifact.doc
        # One copy of the history, shared by every view (nothing edits a message in place).
        history = copy.deepcopy(request.seed)
        for adapter in doc.adapter_names:
            prompt = self.base.system_prompt(adapter, await self.base.tools_for(adapter))
            conversation.views[adapter] = [{"role": "system", "content": prompt}, *history]
        if request.tool_results:
            from mol.runtime.views import adapter_of_call

            adapter = adapter_of_call(next(iter(request.tool_results)), doc.adapters) or (
                doc.route_fallback)
            users = [m for m in request.seed if m["role"] == "user"]
            conversation.turns.append(TurnRecord(
                index=0, adapter=adapter, user=users[-1]["content"] if users else "",
                status="waiting"))

    # -- locks and resources ----------------------------------------------------------------

    async def _acquire(self, session_id: str, held: list[str]) -> None:
        for other in list(held):
            self._release(other)
            held.remove(other)
        lock = self._locks.setdefault(session_id, anyio.Lock())
        await lock.acquire()
        held.append(session_id)

    def _release(self, session_id: str) -> None:
        lock = self._locks.get(session_id)
        if lock is None:
            return
        lock.release()
        if not lock.locked() and lock.statistics().tasks_waiting == 0:
            del self._locks[session_id]

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


def _send(job: Job, item: JobItem) -> None:
    try:
        job.send.send_nowait(item)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass  # the client went away; the turn still completes and is stored
