"""One conversation's turns: each user turn runs route -> answer -> summary.

1. **route** (``mol.runtime.routing``): the router adapter reads the router prompt and
   only the new turn, quoted as untrusted text, constrained to one label. A label outside
   the set, an empty reply or an engine error falls back to ``router.fallback``.
2. **answer**: the chosen adapter runs the agent loop on its own view; tool results go
   back to it without routing. When the engine has not loaded a routed adapter, the turn
   is answered once by ``router.unavailable_fallback`` instead.
3. **summary** (``mol.runtime.summary``): a short record of the turn, kept runtime-side and
   shown to the other adapters before their next turn; it never reaches the client, and
   its failure never fails the turn. Deferred (``mol.runtime.deferred``), it is written
   for a segment of one adapter's turns, when another adapter is about to answer.

With ``[router] speculate = "sticky"`` the answer on the conversation's last adapter starts
with the route hop, and is used only when the route agrees (``mol.runtime.speculation``).

A ``Session`` owns its turns: each one is a ``Turn`` (``mol.runtime.turn``) whose events
go to the session's ``observers`` and whose consistent points go to its ``checkpoint``.
The shared parts (engine, plugins, toolsets, hooks) are the ``Runtime``'s.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

import anyio

from mol.core import events as ev
from mol.core import tracing
from mol.core.errors import ConversationError, EngineAdapterUnavailable
from mol.core.tools import Approval, Later, Resources, Toolset, ToolWrapper
from mol.runtime import deferred, lifecycle, loop, resumption, routing, speculation
from mol.runtime.engine import Engine
from mol.runtime.engine.affinity import conversation_scope
from mol.runtime.equip import equip
from mol.runtime.hooks import ToolCallInfo
from mol.runtime.summary import summarize
from mol.runtime.turn import Checkpoint, Turn, TurnResult
from mol.runtime.views import (
    Conversation,
    TurnRecord,
    adapter_of_call,
    new_call_id,
    open_calls,
)

log = logging.getLogger("mol.harness")

Approver = Callable[[ToolCallInfo], Awaitable[bool | Approval | Later]]
"""``await approve(call)``: whether a person allows an ``ask`` tool's call; ``LATER`` when
the person answers after the turn (the turn ends waiting; ``submit_tool_results``)."""


class Session:
    """Runs the turns of one conversation on a ``Runtime``; closes its resources on exit."""

    def __init__(self, runtime: Any, conversation: Conversation | None = None, *,
                 checkpoint: Checkpoint | None = None, resources: Resources | None = None,
                 observers: Sequence[ev.Observer] = (), approve: Approver | None = None,
                 elicit: Any = None, started: bool = False, engine: Engine | None = None,
                 tool_wrapper: ToolWrapper | None = None,
                 call_ids: Callable[[str], str] | None = None,
                 compact_at: int | None = None, toolsets: Sequence[Toolset] = ()) -> None:
        self.runtime = runtime
        """The ``Runtime`` whose engine, plugins, toolsets and hooks the turns use."""
        self.artifact = runtime.artifact
        self.conversation = conversation or Conversation()
        self.checkpoint = checkpoint
        self.resources = resources or Resources()
        self.observers: list[ev.Observer] = list(observers)
        """Told of every event of every turn, in order (``mol.runtime.turn.Turn.emit``)."""
        if runtime.tracer is not None:  # first: a span learns an event before anyone reacts
            self.observers.insert(0, tracing.observe)
        self.approve = approve
        self.elicit = elicit
        """The tools' ``ToolContext.elicit``: who answers MCP servers' requests for input."""
        self.engine = engine or runtime.engine
        """The runtime's engine, or one wrapping it (an eval episode records through one)."""
        self.tool_wrapper = tool_wrapper
        self.toolsets = list(toolsets)
        """This conversation's own tool sources, after the runtime's (the MCP servers an
        editor brings to a ``mol acp`` session)."""
        self.call_ids = call_ids or new_call_id
        """Issues tool call ids (``call_<adapter>_<hex>``); an eval episode numbers them, so
        that running it twice records the same bytes."""
        self.current: Turn | None = None
        """The turn running now, or the last one."""
        self.compact_at = compact_at
        """Compact a view whose request would take more tokens than this (a client's
        ``context_management``), besides each adapter's own threshold."""
        self._started = started
        """Whether ``SessionStart`` has run (the server's later requests of a conversation
        pass True: the session goes on in the same server)."""

    def restart(self) -> None:
        """Go on with a new, empty conversation (``/clear``): its first turn runs
        ``SessionStart`` again; the old conversation is left as it was."""
        self.conversation = Conversation()
        self.current = None
        self._started = False

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.resources.aclose()

    async def all_tools(self, adapter: str) -> dict[str, Any]:
        """Every tool ``adapter`` gets in this session, before its policy (the runtime's and
        the session's own toolsets, through the session's ``tool_wrapper``)."""
        return await self.runtime.all_tools(adapter, self.tool_wrapper, self.toolsets)

    # -- turns ------------------------------------------------------------------------------

    async def turn(self, text: str, *, adapter: str | None = None,
                   client_tools: list[dict[str, Any]] | None = None,
                   stream: bool = False, params: dict[str, Any] | None = None) -> TurnResult:
        """Run one user turn: expand a slash command, run the hooks that open a turn, route
        (unless ``adapter`` pins it), answer with tools, summarize. ``params`` are the
        client's sampling parameters for the answer hop."""
        doc = self.artifact.doc
        if adapter is not None and adapter not in doc.adapters:
            raise ConversationError(f"no adapter {adapter!r} to pin the turn to; the artifact "
                                    f"declares {', '.join(doc.adapter_names)}")
        turn = self._begin(TurnResult(adapter="", answer="", status="running"))
        with self._traced(turn, text, adapter), conversation_scope(self.conversation.id):
            return await self._new_turn(turn, text, adapter, client_tools, stream, params)

    async def _new_turn(self, turn: Turn, text: str, adapter: str | None,
                        client_tools: list[dict[str, Any]] | None, stream: bool,
                        params: dict[str, Any] | None) -> TurnResult:
        """``turn``'s opening, route and answer (``turn`` says what)."""
        from mol.runtime.opening import prepare

        first, self._started = not self._started, True
        opening = await prepare(self.artifact, self.conversation, self.runtime.hook_sets, text,
                                turn.emit, first)
        if opening.blocked is not None:
            return await self._refused(turn, text, opening.blocked)
        text = opening.text
        record = TurnRecord(index=len(self.conversation.turns), adapter="", user=text,
                            status="running")
        ahead = None if adapter is not None else await self._speculate(
            turn, text, client_tools, stream, params, opening)
        async with speculation.running(ahead):
            if adapter is None:
                decision = await routing.route(self.engine, self.artifact, text, turn.emit,
                                               opening.labels)
            else:
                decision = await routing.decided(turn.emit, ev.RouteDecided(
                    adapter, "", False, "the client named the adapter", ev.PINNED))
            if ahead is not None and decision.adapter != ahead.adapter:
                await ahead.decline(f"the route chose {decision.adapter}")
            record.route_raw, record.route_fallback = decision.raw, decision.fallback
            self.conversation.turns.append(record)
            turn.record = record
            answer = partial(self._open, turn, text=text, client_tools=client_tools,
                             stream=stream, params=params, opening=opening, ahead=ahead)
            return await self._answer(turn, decision, answer)

    async def _answer(self, turn: Turn, decision: ev.RouteDecided, answer: Any) -> TurnResult:
        """``answer`` on the decided adapter; when the engine has not loaded it, once more on
        ``router.unavailable_fallback`` (unless the turn is pinned)."""
        record = turn.record
        assert record is not None
        fallback = self.artifact.doc.unavailable_fallback
        retry = decision.how != ev.PINNED and fallback != decision.adapter
        try:
            return await answer(decision, retry=retry)
        except EngineAdapterUnavailable as exc:
            if not retry or record.status == "interrupted":
                raise
            log.warning("adapter %s is unavailable on the engine (%s); answering with %s",
                        decision.adapter, exc, fallback)
            await turn.emit(ev.Failed("answer", f"{decision.adapter} is unavailable: {exc}"))
            record.route_fallback = True
            return await answer(await routing.decided(turn.emit, ev.RouteDecided(
                fallback, decision.raw, True, f"{decision.adapter} is not loaded by the engine",
                ev.FALLBACK)), retry=False)

    async def _speculate(self, turn: Turn, text: str, client_tools: Any, stream: bool,
                         params: dict[str, Any] | None, opening: Any) -> Any:
        """With ``[router] speculate = "sticky"``: the answer request of the conversation's
        last adapter, started ahead of the route (``mol.runtime.speculation``), or None."""
        doc = self.artifact.doc
        last = next((t.adapter for t in reversed(self.conversation.turns) if t.adapter), None)
        if (doc.router.speculate != "sticky" or last is None
                or not getattr(self.engine, "speculates", False)
                or last not in (opening.labels or doc.route_labels)
                or open_calls(self.conversation.view(last))):
            return None
        cfg = await equip(self, turn, last, client_tools, stream, params, narrow=opening.narrow)
        system = partial(self.runtime.system_prompt, last,
                         self.runtime.by_policy(last, cfg.all_tools))
        pending = self.conversation.begin(last, system, text, doc.views.others, opening.context)
        messages, tools, first = loop.first_request(cfg, self.conversation.engine_view(last),
                                                    pending)
        return speculation.Speculation(self.engine, last, messages, tools, first, cfg.stream,
                                       turn.emit)

    async def submit_tool_results(self, results: dict[str, str], *,
                                  approvals: dict[str, Approval] | None = None,
                                  client_tools: list[dict[str, Any]] | None = None,
                                  stream: bool = False,
                                  params: dict[str, Any] | None = None) -> TurnResult:
        """Continue a turn waiting on the client with its tools' results (call id ->
        content) and a person's answers to the calls it left open for approval
        (``approvals``: call id -> answer, for calls in ``Conversation.asked``; those run
        now, or are refused). They go to the adapter that issued the calls, without
        routing; other adapters' turns queued for that adapter stay queued for its next user
        turn. While calls stay open, the turn goes on waiting for them."""
        approvals = approvals or {}
        asked = self.conversation.asked
        unasked = [c for c in approvals if c not in asked or "ended" in asked[c]]
        if unasked:
            raise ConversationError(f"no call waits for a person's answer: {unasked}")
        declared = self.artifact.doc.adapters
        answered = [*results, *approvals]
        adapters = {adapter_of_call(call_id, declared) for call_id in answered}
        if None in adapters or len(adapters) != 1:
            unknown = [c for c in answered if adapter_of_call(c, declared) is None]
            raise ConversationError(f"tool results must answer calls mol issued to one adapter; "
                                    f"unknown call ids: {unknown or sorted(answered)}")
        adapter = adapters.pop()
        waiting = [t for t in self.conversation.turns if t.status == "waiting"]
        record = waiting[-1] if waiting and waiting[-1].adapter == adapter else TurnRecord(
            index=len(self.conversation.turns), adapter=adapter, user="", status="running")
        if record not in self.conversation.turns:
            self.conversation.turns.append(record)
        record.status = "running"
        turn = self._begin(TurnResult(adapter=adapter, answer="", status="running",
                                      route=ev.PINNED))
        turn.record = record
        with self._traced(turn, "", adapter), conversation_scope(self.conversation.id):
            await routing.decided(turn.emit, ev.RouteDecided(
                adapter, "", False, "tool results go back to the adapter that issued the calls",
                ev.PINNED))
            await deferred.settle(self, turn, adapter)
            cfg = await equip(self, turn, adapter, client_tools, stream, params)
            turn.adapter, turn.opens = adapter, False
            pending, left = await resumption.answers(self.conversation, turn, cfg, results,
                                                     approvals)
            if left:  # answers came for some of the calls only: the turn waits for the rest
                return resumption.still_waiting(self.conversation, turn, left)
            return await self._run(turn, cfg, pending)

    async def compact(self, adapter: str | None = None,
                      instructions: str = "") -> list[ev.Compacted]:
        """Compact ``adapter``'s view now (every adapter with a view when None), as asked
        (``/compact``, ``mol sessions compact``, ``POST /v1/responses/compact``): the
        ``manual`` trigger, whatever the window's fill; ``instructions`` are added to the
        compaction's prompt. The compactions made (none for a view too short to compact,
        or when a hook blocked it)."""
        from mol.runtime import compaction

        doc = self.artifact.doc
        if adapter is not None and adapter not in doc.adapters:
            raise ConversationError(f"no adapter {adapter!r} to compact; the artifact "
                                    f"declares {', '.join(doc.adapter_names)}")
        names = [adapter] if adapter else [a for a in doc.adapter_names
                                           if self.conversation.views.get(a)]
        turn = Turn(self, TurnResult(adapter=adapter or "", answer="", status="compaction"))
        for name in names:
            cfg = await equip(self, turn, name, None, False, None)
            turn.adapter = name
            with conversation_scope(self.conversation.id):
                await compaction.compact(turn, name, "manual", instructions,
                                         tools=loop.tool_specs(cfg) or None)
        return [e for e in turn.events if isinstance(e, ev.Compacted)]

    def _begin(self, result: TurnResult) -> Turn:
        self.current = Turn(self, result)
        return self.current

    def _traced(self, turn: Turn, text: str, adapter: str | None) -> Any:
        """The scope of ``turn``'s ``invoke_agent`` span (``mol.core.tracing``): a child of the
        span current here (a server request's, an eval episode's), else a root of the
        runtime's tracer; nothing when nothing traces."""
        return tracing.root(self.runtime.tracer, "turn", turn=turn, text=text, adapter=adapter,
                            conversation=self.conversation.id, artifact=self.artifact)

    async def _open(self, turn: Turn, decision: ev.RouteDecided, *, text: str,
                    client_tools: list[dict[str, Any]] | None, stream: bool,
                    params: dict[str, Any] | None, retry: bool, opening: Any,
                    ahead: Any = None) -> TurnResult:
        """Answer a new turn on the decided adapter (the deferred summaries it has not seen,
        its opening messages, then ``_run``); ``ahead``: its first request may be the one a
        speculation started."""
        record, result = turn.record, turn.result
        assert record is not None
        adapter = record.adapter = result.adapter = decision.adapter
        result.route = decision.how
        await deferred.settle(self, turn, adapter)
        # Nothing was answered yet: a machine that dies now loses only a turn just begun.
        await turn.checkpoint(durable=False)
        started = await lifecycle.subagent_start(self.runtime.hook_sets, self.conversation.id,
                                                 adapter, record.index, turn.emit)
        cfg = await equip(self, turn, adapter, client_tools, stream, params,
                                 narrow=opening.narrow)
        turn.adapter, turn.opens = adapter, True
        # The system prompt lists the adapter's tools by policy, not the turn's narrowing by a
        # slash command: it is written once and must not depend on the first turn's command.
        system = partial(self.runtime.system_prompt, adapter,
                         self.runtime.by_policy(adapter, cfg.all_tools))
        messages = self.conversation.begin(adapter, system, text,
                                           self.artifact.doc.views.others,
                                           opening.context + started.context)
        # A guess already cancelled (the route chose another adapter, whose engine then
        # fell back to this one) is not taken: this answer makes its own request.
        if ahead is not None and ahead.adapter == adapter and not ahead.decided:
            cfg = dataclasses.replace(cfg, engine=speculation.Adopting(cfg.engine, ahead))
        return await self._run(turn, cfg, messages, retry=retry)

    async def _run(self, turn: Turn, cfg: loop.LoopConfig, pending: list[dict[str, Any]],
                   retry: bool = False) -> TurnResult:
        """The answer hop, then the summary. ``retry``: an unavailable adapter's error is
        raised untouched, before anything was committed, for the caller to answer again."""
        record, result, adapter = turn.record, turn.result, cfg.adapter
        assert record is not None
        before = len(self.conversation.view(adapter))
        try:
            outcome = await loop.run(cfg, turn, self.conversation.engine_view(adapter), pending)
        except BaseException as exc:
            if not (retry and isinstance(exc, EngineAdapterUnavailable)
                    and len(self.conversation.view(adapter)) == before):
                record.status = "interrupted"
                with anyio.CancelScope(shield=True):
                    await turn.checkpoint()
            raise
        record.tools += outcome.tools_used
        result.stopped, result.reasoning = outcome.stopped, outcome.reasoning
        if outcome.stopped == "client_tools":
            record.status, result.status = "waiting", "waiting"
            result.client_calls = outcome.client_calls
            result.asked = loop.asked_calls(outcome.asked)
            await turn.checkpoint()
            return result
        record.answer = result.answer = outcome.answer
        await turn.emit(ev.Answered(adapter, record.answer, outcome.stopped, outcome.reasoning,
                                    outcome.finish_reason, outcome.stop_sequence))
        if not deferred.deferred(self.artifact, adapter):  # else its segment waits for a reader
            await self._summarize(turn, record)
        record.status, result.status = "complete", "complete"
        await turn.checkpoint()
        return result

    async def _summarize(self, turn: Turn, record: TurnRecord) -> None:
        """The summary of the turn just answered, queued for the other adapters unless a
        ``SubagentStop`` hook keeps it from them."""
        adapter = record.adapter
        await summarize(self.engine, self.artifact, record, self.conversation.view(adapter),
                        turn.emit)
        handed = await lifecycle.subagent_stop(self.runtime.hook_sets, self.conversation.id,
                                               adapter, record.index, record.answer,
                                               record.summary, turn.emit)
        if handed.blocked is None:
            self.conversation.share_summary(adapter, record.summary,
                                            self.artifact.doc.adapter_names, record.user)

    async def settle(self) -> int:
        """Write the deferred summaries still open (``[summary] when = "deferred"``) and
        checkpoint them: the conversation goes idle (``mol serve`` after ``idle_after`` quiet
        seconds, ``mol chat`` at exit). Returns how many segments were summarized."""
        if not deferred.open_segments(self.conversation):
            return 0
        turn = Turn(self, TurnResult(adapter="", answer="", status="summary"))
        with conversation_scope(self.conversation.id):
            done = await deferred.settle(self, turn)
        await turn.checkpoint()
        return done

    async def _refused(self, turn: Turn, text: str, reason: str) -> TurnResult:
        """A turn a ``UserPromptSubmit`` hook blocked: recorded, but no model and no view
        saw it."""
        result = turn.result
        result.answer = f"[mol: the prompt was blocked by a hook: {reason}]"
        result.status, result.stopped = "complete", "prompt_blocked"
        turn.record = TurnRecord(index=len(self.conversation.turns), adapter="", user=text,
                                 answer=result.answer, status="blocked")
        self.conversation.turns.append(turn.record)
        # Stored before the answer is announced: a server reply names its point on it.
        await turn.checkpoint()
        await turn.emit(ev.Answered("", result.answer, result.stopped))
        return result

