"""The MoL harness: each user turn runs route -> answer -> summary.

1. **route** (``mol.runtime.routing``): the router adapter reads the router prompt and
   only the new turn, quoted as untrusted text, constrained to one label. A label outside
   the set, an empty reply or an engine error falls back to ``router.fallback``.
2. **answer**: the chosen adapter runs the agent loop on its own view; tool results go
   back to it without routing. When the engine has not loaded a routed adapter, the turn
   is answered once by ``router.unavailable_fallback`` instead.
3. **summary** (``mol.runtime.summary``): a short record of the turn, kept runtime-side and
   shown to the other adapters before their next turn; it never reaches the client, and
   its failure never fails the turn.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from functools import partial
from typing import Any

import anyio

from mol.core import events as ev
from mol.core.awaitables import maybe_await
from mol.core.errors import ConversationError, EngineAdapterUnavailable, ToolError
from mol.core.tools import Resources, Tool, ToolContext, Toolset
from mol.hcp.loader import Artifact
from mol.runtime import lifecycle, loop, routing
from mol.runtime.engine import Engine, LiteLLMEngine
from mol.runtime.policy import visible
from mol.runtime.summary import summarize
from mol.runtime.views import Conversation, TurnRecord, adapter_of_call, new_call_id

log = logging.getLogger("mol.harness")

Checkpoint = Callable[..., Awaitable[None]]
"""``checkpoint(conversation, record, durable=True)``: persist one consistent point;
``durable=False`` for a point nothing was told about yet (``SessionStore.save``)."""
ToolWrapper = Callable[[str, dict[str, Tool]], dict[str, Tool]]
"""``wrap(adapter, tools) -> tools``: replaces the tools an adapter gets before policy (recording
an episode wraps each tool's ``call``; replaying one serves recorded results)."""


@dataclass
class TurnResult:
    """The outcome of a turn, as the client may see it (the summary is not in it)."""

    adapter: str
    answer: str
    status: str
    """``complete``, or ``waiting`` for the results of ``client_calls``."""
    client_calls: list[dict[str, Any]] = field(default_factory=list)
    stopped: str = ""
    events: list[ev.Event] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    route: str = ev.ROUTED
    """How the adapter was chosen: ``routed``, ``fallback`` or ``pinned``."""
    reasoning: str = ""
    """The engine's reasoning on the last reply."""


class Harness:
    """Runs the turns of one conversation against one HCP artifact."""

    def __init__(
        self,
        artifact: Artifact,
        *,
        engine: Engine | None = None,
        engine_url: str | None = None,
        plugins: Any = None,
        toolsets: Sequence[Toolset] = (),
        conversation: Conversation | None = None,
        approve: loop.Approver | None = None,
        checkpoint: Checkpoint | None = None,
        resources: Resources | None = None,
        sandbox_pool: Any = None,
        session_started: bool = False,
        tool_wrapper: ToolWrapper | None = None,
        call_ids: Callable[[str], str] | None = None,
        elicit: Any = None,
    ) -> None:
        if plugins is None:
            from mol.plugins.manager import PluginManager

            plugins = PluginManager.for_artifact(artifact)
        self.artifact = artifact
        self.engine = engine or LiteLLMEngine.from_artifact(artifact, engine_url)
        self.plugins = plugins
        self.toolsets = list(toolsets)
        self.conversation = conversation or Conversation()
        self.approve = approve
        self.checkpoint = checkpoint
        self.resources = resources or Resources()
        self.sandbox_pool = sandbox_pool
        """A warm ``SandboxPool`` the session's sandbox is taken from, when one is open."""
        self.hook_sets = lifecycle.hook_sets(artifact)
        """The command hooks: the artifact's own and those of the bundles in use."""
        self._started = session_started
        """Whether ``SessionStart`` has run (the server's later requests of a conversation
        pass True: the session goes on in the same server)."""
        self.tool_wrapper = tool_wrapper
        self.elicit = elicit  # the tools' ToolContext.elicit (the server sets one per turn)
        self.call_ids = call_ids
        """Issues tool call ids (``call_<adapter>_<hex>``); random ones when None. An eval
        episode numbers them, so that running it twice records the same bytes."""

    async def __aenter__(self) -> Harness:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.resources.aclose()

    # -- tools ------------------------------------------------------------------------------

    async def all_tools(self, adapter: str) -> dict[str, Tool]:
        """Every runtime tool for ``adapter`` before policy: plugins, then toolsets.

        A name offered by two sources is a ``ToolError`` naming both: one of them
        silently shadowing the other would run a tool nobody chose."""
        tools = dict(self.plugins.tools)
        for toolset in self.toolsets:
            for tool in await toolset.tools(adapter):
                other = tools.setdefault(tool.name, tool)
                if other is not tool:
                    raise ToolError(f"tool {tool.name!r} is offered by both {other.source} and "
                                    f"{tool.source}; rename or disable one of them")
        return tools if self.tool_wrapper is None else self.tool_wrapper(adapter, tools)

    async def tools_for(self, adapter: str) -> dict[str, Tool]:
        """The tools ``adapter`` may see and call, by its policy."""
        return self._by_policy(adapter, await self.all_tools(adapter))

    def _by_policy(self, adapter: str, tools: dict[str, Tool]) -> dict[str, Tool]:
        config = self.artifact.doc.adapter(adapter)
        return {name: tool for name, tool in tools.items() if visible(name, config)}

    def system_prompt(self, adapter: str, tools: dict[str, Tool]) -> str:
        """The adapter's system prompt: its prompt, tool list and skill catalog, in a stable
        order and with nothing that changes between requests."""
        config = self.artifact.doc.adapter(adapter)
        parts = [self.artifact.prompt(f"adapters.{adapter}.prompt").strip()]
        if tools:
            lines = [f"- {name}: {tools[name].description.splitlines()[0]}"
                     for name in sorted(tools)]
            parts.append("# Tools\n" + "\n".join(lines))
        if config.skills:
            from mol.plugins.catalog import catalog_text

            catalog = catalog_text(self.artifact, adapter)
            if catalog:
                parts.append(catalog)
        parts.append(self.artifact.prompt("model.identity").strip())
        return "\n\n".join(p for p in parts if p)

    # -- the three hops ---------------------------------------------------------------------

    async def route(self, text: str, emit: Callable[[ev.Event], Awaitable[None]],
                    labels: list[str] | None = None) -> ev.RouteDecided:
        """Hop 1: which adapter answers ``text`` (and whether the fallback was used), among
        ``labels`` when given (a slash command's adapters), else the router's labels."""
        return await routing.route(self.engine, self.artifact, text, emit, labels)

    async def summarize(self, record: TurnRecord,
                        emit: Callable[[ev.Event], Awaitable[None]]) -> None:
        """Hop 3: a short record of the turn for the other adapters (never for the client)."""
        await summarize(self.engine, self.artifact, record,
                        self.conversation.view(record.adapter), emit)

    # -- turns ------------------------------------------------------------------------------

    async def turn(self, text: str, *, adapter: str | None = None,
                   on_event: ev.OnEvent | None = None,
                   client_tools: list[dict[str, Any]] | None = None,
                   stream: bool = False, params: dict[str, Any] | None = None) -> TurnResult:
        """Run one user turn: expand a slash command, run the hooks that open a turn, route
        (unless ``adapter`` pins it), answer with tools, summarize. ``params`` are the
        client's sampling parameters for the answer hop."""
        from mol.runtime.opening import prepare

        if adapter is not None and adapter not in self.artifact.doc.adapters:
            raise ConversationError(f"no adapter {adapter!r} to pin the turn to; the artifact "
                                    f"declares {', '.join(self.artifact.doc.adapter_names)}")
        result = TurnResult(adapter="", answer="", status="running")
        emit = self._emitter(on_event, result)
        first, self._started = not self._started, True
        opening = await prepare(self.artifact, self.conversation, self.hook_sets, text, emit,
                                first)
        if opening.blocked is not None:
            return await self._refused(result, text, opening.blocked, emit)
        text = opening.text
        record = TurnRecord(index=len(self.conversation.turns), adapter="", user=text,
                            status="running")
        if adapter is None:
            decision = await self.route(text, emit, opening.labels)
        else:
            decision = await routing.decided(emit, ev.RouteDecided(
                adapter, "", False, "the client named the adapter", ev.PINNED))
        record.route_raw, record.route_fallback = decision.raw, decision.fallback
        self.conversation.turns.append(record)
        answer = partial(self._open, record=record, result=result, text=text, emit=emit,
                         client_tools=client_tools, stream=stream, params=params,
                         opening=opening)
        fallback = self.artifact.doc.unavailable_fallback
        retry = decision.how != ev.PINNED and fallback != decision.adapter
        try:
            return await answer(decision, retry=retry)
        except EngineAdapterUnavailable as exc:
            if not retry or record.status == "interrupted":
                raise
            log.warning("adapter %s is unavailable on the engine (%s); answering with %s",
                        decision.adapter, exc, fallback)
            await emit(ev.Failed("answer", f"{decision.adapter} is unavailable: {exc}"))
            record.route_fallback = True
            return await answer(await routing.decided(emit, ev.RouteDecided(
                fallback, decision.raw, True, f"{decision.adapter} is not loaded by the engine",
                ev.FALLBACK)), retry=False)

    async def _open(self, decision: ev.RouteDecided, *, record: TurnRecord, result: TurnResult,
                    text: str, emit: Callable[[ev.Event], Awaitable[None]],
                    client_tools: list[dict[str, Any]] | None, stream: bool,
                    params: dict[str, Any] | None, retry: bool, opening: Any) -> TurnResult:
        """Answer a new turn on the decided adapter (its opening messages, then ``_run``)."""
        adapter = record.adapter = result.adapter = decision.adapter
        result.route = decision.how
        # Nothing was answered yet: a machine that dies now loses only a turn just begun.
        await self._checkpoint(record, durable=False)
        started = await lifecycle.subagent_start(self.hook_sets, self.conversation.id, adapter,
                                                 record.index, emit)
        env = await self._env(adapter, client_tools, emit, stream, record, opens=True,
                              params=params, narrow=opening.narrow)
        # The system prompt lists the adapter's tools by policy, not the turn's narrowing by a
        # slash command: it is written once and must not depend on the first turn's command.
        system = partial(self.system_prompt, adapter, self._by_policy(adapter, env.all_tools))
        messages = self.conversation.begin(adapter, system, text, self.artifact.doc.views.others,
                                           opening.context + started.context)
        return await self._run(env, record, result, messages, retry=retry)

    async def submit_tool_results(self, results: dict[str, str], *,
                                  on_event: ev.OnEvent | None = None,
                                  client_tools: list[dict[str, Any]] | None = None,
                                  stream: bool = False,
                                  params: dict[str, Any] | None = None) -> TurnResult:
        """Continue a turn waiting on client tools with their results (call id -> content).
        The results go to the adapter that issued the calls, without routing; other
        adapters' turns queued for that adapter stay queued for its next user turn."""
        declared = self.artifact.doc.adapters
        adapters = {adapter_of_call(call_id, declared) for call_id in results}
        if None in adapters or len(adapters) != 1:
            unknown = [c for c in results if adapter_of_call(c, declared) is None]
            raise ConversationError(f"tool results must answer calls mol issued to one adapter; "
                                    f"unknown call ids: {unknown or sorted(results)}")
        adapter = adapters.pop()
        waiting = [t for t in self.conversation.turns if t.status == "waiting"]
        record = waiting[-1] if waiting and waiting[-1].adapter == adapter else TurnRecord(
            index=len(self.conversation.turns), adapter=adapter, user="", status="running")
        if record not in self.conversation.turns:
            self.conversation.turns.append(record)
        record.status = "running"
        result = TurnResult(adapter=adapter, answer="", status="running", route=ev.PINNED)
        emit = self._emitter(on_event, result)
        await routing.decided(emit, ev.RouteDecided(
            adapter, "", False, "tool results go back to the adapter that issued the calls",
            ev.PINNED))
        env = await self._env(adapter, client_tools, emit, stream, record, opens=False,
                              params=params)
        pending = [{"role": "tool", "tool_call_id": call_id, "content": content}
                   for call_id, content in results.items()]
        return await self._run(env, record, result, pending)

    async def _run(self, env: loop.LoopEnv, record: TurnRecord, result: TurnResult,
                   pending: list[dict[str, Any]], retry: bool = False) -> TurnResult:
        """The answer hop, then the summary. ``retry``: an unavailable adapter's error is
        raised untouched, before anything was committed, for the caller to answer again."""
        before = len(self.conversation.view(env.adapter))
        try:
            outcome = await loop.run(env, self.conversation.view(env.adapter), pending)
        except BaseException as exc:
            if not (retry and isinstance(exc, EngineAdapterUnavailable)
                    and len(self.conversation.view(env.adapter)) == before):
                record.status = "interrupted"
                with anyio.CancelScope(shield=True):
                    await self._checkpoint(record)
            raise
        record.tools += outcome.tools_used
        result.stopped, result.reasoning = outcome.stopped, outcome.reasoning
        if outcome.stopped == "client_tools":
            record.status, result.status = "waiting", "waiting"
            result.client_calls = outcome.client_calls
            await self._checkpoint(record)
            return result
        record.answer = result.answer = outcome.answer
        await env.emit(ev.Answered(env.adapter, record.answer, outcome.stopped,
                                   outcome.reasoning))
        await self.summarize(record, env.emit)
        handed = await lifecycle.subagent_stop(self.hook_sets, self.conversation.id, env.adapter,
                                               record.index, record.answer, record.summary,
                                               env.emit)
        if handed.blocked is None:
            self.conversation.share_summary(env.adapter, record.summary,
                                            self.artifact.doc.adapter_names, record.user)
        record.status, result.status = "complete", "complete"
        await self._checkpoint(record)
        return result

    async def _env(self, adapter: str, client_tools: list[dict[str, Any]] | None,
                   emit: Callable[[ev.Event], Awaitable[None]], stream: bool,
                   record: TurnRecord, *, opens: bool, params: dict[str, Any] | None = None,
                   narrow: list[str] | None = None) -> loop.LoopEnv:
        """The loop's environment; ``opens``: the turn's first commit opens it (it carries
        the pending summaries, now consumed), else it resumes a waiting turn. ``narrow``
        keeps only the tools matching those patterns (a slash command's ``allowed-tools``)."""
        all_tools = await self.all_tools(adapter)
        config = self.artifact.doc.adapter(adapter)
        review = _review(adapter, config, emit)
        if review is not None and config.genui.tool:  # type: ignore[union-attr]
            all_tools = _with(all_tools, review.tool())
        tools = self._by_policy(adapter, all_tools)
        if narrow is not None:
            tools = {n: t for n, t in tools.items() if any(fnmatchcase(n, p) for p in narrow)}
        first = {"commit": opens}

        async def commit(messages: list[dict[str, Any]], answer: str | None = None) -> None:
            self.conversation.commit(adapter, messages, opened=first["commit"])
            first["commit"] = False
            if answer is not None:
                record.answer = answer  # stored with the checkpoint that stores the answer
            await self._checkpoint(record)

        context = ToolContext(adapter=adapter, session_id=self.conversation.id,
                              artifact=self.artifact, resources=self.resources,
                              sandbox_pool=self.sandbox_pool, elicit=self.elicit)
        return loop.LoopEnv(
            engine=self.engine, adapter=adapter, config=config, tools=tools,
            all_tools=all_tools, client_tools=_client_tools(client_tools), context=context,
            emit=emit, commit=commit, plugin_hook=self.plugins.hook,
            hook_sets=[s for s in self.hook_sets if s.applies(adapter)],
            approve=self.approve, stream=stream and review is None,
            review=review.answer if review is not None else None, overrides=dict(params or {}),
            new_id=self.call_ids or new_call_id)

    async def _refused(self, result: TurnResult, text: str, reason: str,
                       emit: Callable[[ev.Event], Awaitable[None]]) -> TurnResult:
        """A turn a ``UserPromptSubmit`` hook blocked: recorded, but no model and no view
        saw it."""
        result.answer = f"[mol: the prompt was blocked by a hook: {reason}]"
        result.status, result.stopped = "complete", "prompt_blocked"
        record = TurnRecord(index=len(self.conversation.turns), adapter="", user=text,
                            answer=result.answer, status="blocked")
        self.conversation.turns.append(record)
        # Stored before the answer is announced: a server reply names its point on it.
        await self._checkpoint(record)
        await emit(ev.Answered("", result.answer, result.stopped))
        return result

    def _emitter(self, on_event: ev.OnEvent | None,
                 result: TurnResult) -> Callable[[ev.Event], Awaitable[None]]:
        async def emit(event: ev.Event) -> None:
            result.events.append(event)
            if isinstance(event, ev.ModelCalled):
                ev.add_usage(result.usage, event.usage)
            if on_event is not None:
                await maybe_await(on_event(event))

        return emit

    async def _checkpoint(self, record: TurnRecord, durable: bool = True) -> None:
        if self.checkpoint is not None:
            await self.checkpoint(self.conversation, record, durable=durable)


def _review(adapter: str, config: Any, emit: Callable[[ev.Event], Awaitable[None]]) -> Any:
    """The turn's GenUI checks when the adapter has them on. Its answers are then not
    streamed: a UI reaches the client only once checked (or out of repair rounds)."""
    if config.genui is None or not config.genui.enabled:
        return None
    from mol.genui.review import Review

    return Review(adapter, config.genui, emit)


def _with(tools: dict[str, Tool], tool: Tool) -> dict[str, Tool]:
    other = tools.get(tool.name)
    if other is not None:
        raise ToolError(f"tool {tool.name!r} is offered by both {other.source} and "
                        f"{tool.source}; rename or disable one of them")
    return {**tools, tool.name: tool}


def _client_tools(tools: list[dict[str, Any]] | None) -> dict[str, dict[str, Any]]:
    """Client-provided OpenAI ``tools`` entries by function name."""
    out: dict[str, dict[str, Any]] = {}
    for entry in tools or []:
        function = entry.get("function") if isinstance(entry, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            out[function["name"]] = entry
    return out
