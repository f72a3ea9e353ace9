"""The MoL harness: each user turn runs route -> answer -> summary.

1. **route**: L0 reads the router prompt and only the new turn, quoted as
   untrusted text, constrained to one label. A label outside the set, an empty
   reply or an engine error falls back to ``router.fallback``.
2. **answer**: the chosen adapter runs the agent loop on its own view; tool
   results go back to it without routing.
3. **summary**: the ``[summary]`` adapter writes a short record of the turn,
   kept runtime-side and appended to the other adapters' views before their
   next turn; it never reaches the client, and its failure never fails the turn.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from mol.hcp.loader import Artifact
from mol.runtime import events as ev
from mol.runtime import loop
from mol.runtime.engine import Engine, LiteLLMEngine
from mol.runtime.errors import ConversationError, EngineError, ToolError
from mol.runtime.hooks import maybe_await
from mol.runtime.policy import visible
from mol.runtime.tools import Resources, Tool, ToolContext, Toolset
from mol.runtime.views import (
    Conversation,
    TurnRecord,
    adapter_of_call,
    new_call_id,
    quote_untrusted,
)

DEFAULT_SUMMARY_PROMPT = (
    "Summarize the turn below for the other specialists of this assistant in at most two "
    "sentences: what the user wanted, what was done and the outcome. Plain text."
)
SUMMARY_INPUT_LIMIT = 4000
"""Characters of the turn the summary hop reads (long answers are cut in the middle)."""

Checkpoint = Callable[[Conversation, TurnRecord], Awaitable[None]]
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


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]} [...] {text[-half:]}"


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
        tool_wrapper: ToolWrapper | None = None,
        call_ids: Callable[[str], str] | None = None,
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
        self.tool_wrapper = tool_wrapper
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
        parts = [self.artifact.prompt_text(config.prompt).strip()]
        if tools:
            lines = [f"- {name}: {tools[name].description.splitlines()[0]}"
                     for name in sorted(tools)]
            parts.append("# Tools\n" + "\n".join(lines))
        if config.skills:
            from mol.skills import catalog_text

            catalog = catalog_text(self.artifact, adapter)
            if catalog:
                parts.append(catalog)
        return "\n\n".join(p for p in parts if p)

    # -- the three hops ---------------------------------------------------------------------

    async def route(self, text: str,
                    emit: Callable[[ev.Event], Awaitable[None]]) -> ev.RouteDecided:
        """Hop 1: which adapter answers ``text`` (and whether the fallback was used)."""
        router = self.artifact.doc.router
        messages = [
            {"role": "system", "content": self.artifact.prompt_text(router.prompt)},
            {"role": "user", "content": quote_untrusted(text)},
        ]
        try:
            completion = await self.engine.complete(
                "L0", messages, params={"max_tokens": router.max_tokens, "temperature": 0},
                choices=list(router.labels))
        except EngineError as exc:
            await emit(ev.Failed("route", str(exc)))
            return await _decided(emit, ev.RouteDecided(router.fallback, "", True,
                                                        f"engine error: {exc}"))
        await emit(ev.ModelCalled("L0", "route", completion.usage.to_dict(),
                                  round(completion.duration, 6)))
        raw = completion.content.strip()
        label = self._label(raw, router.labels)
        if label is None:
            reason = "empty reply" if not raw else "label outside the set"
            return await _decided(emit, ev.RouteDecided(router.fallback, raw, True, reason))
        return await _decided(emit, ev.RouteDecided(label, raw, False))

    def _label(self, raw: str, labels: list[str]) -> str | None:
        if raw in labels:
            return raw
        if self.artifact.doc.engine.routing_constraint == "none":
            # Unconstrained engines may wrap the label in words: take the first label named.
            found = re.search(r"\b(" + "|".join(map(re.escape, labels)) + r")\b", raw)
            return found.group(1) if found else None
        return None

    async def summarize(self, record: TurnRecord,
                        emit: Callable[[ev.Event], Awaitable[None]]) -> None:
        """Hop 3: a short record of the turn for the other adapters (never for the client)."""
        config = self.artifact.doc.summary
        tools = ", ".join(record.tools) or "none"
        plain = _cut(f"{record.adapter} handled: {record.user} -> {record.answer}", 400)
        if not config.enabled:
            record.summary, record.summary_ok = plain, True
            return
        prompt = self.artifact.prompt_text(config.prompt) or DEFAULT_SUMMARY_PROMPT
        body = _cut(f"User: {record.user}\n\nAnswered by {record.adapter}: {record.answer}\n\n"
                    f"Tools used: {tools}", SUMMARY_INPUT_LIMIT)
        messages = [{"role": "system", "content": prompt}, {"role": "user", "content": body}]
        try:
            completion = await self.engine.complete(
                config.adapter, messages, params={"max_tokens": config.max_tokens,
                                                  "temperature": 0})
            text = completion.content.strip()
            await emit(ev.ModelCalled(config.adapter, "summary", completion.usage.to_dict(),
                                      round(completion.duration, 6)))
            if not text:
                raise EngineError("the summary reply was empty")
            record.summary, record.summary_ok = f"[{record.adapter}] {text}", True
        except EngineError as exc:
            await emit(ev.Failed("summary", f"{exc}; stored a plain record instead"))
            record.summary, record.summary_ok = plain, False
        await emit(ev.Summarized(config.adapter, record.summary_ok, record.summary))

    # -- turns ------------------------------------------------------------------------------

    async def turn(self, text: str, *, adapter: str | None = None,
                   on_event: ev.OnEvent | None = None,
                   client_tools: list[dict[str, Any]] | None = None,
                   stream: bool = False) -> TurnResult:
        """Run one user turn: route (unless ``adapter`` pins it), answer with tools, summarize."""
        result = TurnResult(adapter="", answer="", status="running")
        emit = self._emitter(on_event, result)
        record = TurnRecord(index=len(self.conversation.turns), adapter="", user=text,
                            status="running")
        if adapter is None:
            decision = await self.route(text, emit)
        else:
            decision = await _decided(emit, ev.RouteDecided(adapter, "", False,
                                                            "the client named the adapter"))
        adapter = decision.adapter
        record.adapter, result.adapter = adapter, adapter
        record.route_raw, record.route_fallback = decision.raw, decision.fallback
        self.conversation.turns.append(record)
        await self._checkpoint(record)
        env = await self._env(adapter, client_tools, emit, stream, record, opens=True)
        opening = self.conversation.begin(
            adapter, lambda: self.system_prompt(adapter, env.tools), text)
        return await self._run(env, record, result, opening)

    async def submit_tool_results(self, results: dict[str, str], *,
                                  on_event: ev.OnEvent | None = None,
                                  client_tools: list[dict[str, Any]] | None = None,
                                  stream: bool = False) -> TurnResult:
        """Continue a turn waiting on client tools with their results (call id -> content).
        The results go to the adapter that issued the calls, without routing; summaries
        queued for that adapter stay queued for its next user turn."""
        adapters = {adapter_of_call(call_id) for call_id in results}
        if None in adapters or len(adapters) != 1:
            unknown = [c for c in results if adapter_of_call(c) is None]
            raise ConversationError(f"tool results must answer calls mol issued to one adapter; "
                                    f"unknown call ids: {unknown or sorted(results)}")
        adapter = adapters.pop()
        waiting = [t for t in self.conversation.turns if t.status == "waiting"]
        record = waiting[-1] if waiting and waiting[-1].adapter == adapter else TurnRecord(
            index=len(self.conversation.turns), adapter=adapter, user="", status="running")
        if record not in self.conversation.turns:
            self.conversation.turns.append(record)
        record.status = "running"
        result = TurnResult(adapter=adapter, answer="", status="running")
        emit = self._emitter(on_event, result)
        env = await self._env(adapter, client_tools, emit, stream, record, opens=False)
        pending = [{"role": "tool", "tool_call_id": call_id, "content": content}
                   for call_id, content in results.items()]
        return await self._run(env, record, result, pending)

    async def _run(self, env: loop.LoopEnv, record: TurnRecord, result: TurnResult,
                   pending: list[dict[str, Any]]) -> TurnResult:
        try:
            outcome = await loop.run(env, self.conversation.view(env.adapter), pending)
        except BaseException:
            record.status = "interrupted"
            with anyio.CancelScope(shield=True):
                await self._checkpoint(record)
            raise
        record.tools += outcome.tools_used
        result.stopped = outcome.stopped
        if outcome.stopped == "client_tools":
            record.status, result.status = "waiting", "waiting"
            result.client_calls = outcome.client_calls
            await self._checkpoint(record)
            return result
        record.answer = result.answer = outcome.answer
        await env.emit(ev.Answered(env.adapter, record.answer, outcome.stopped))
        await self.summarize(record, env.emit)
        self.conversation.share_summary(env.adapter, record.summary)
        record.status, result.status = "complete", "complete"
        await self._checkpoint(record)
        return result

    async def _env(self, adapter: str, client_tools: list[dict[str, Any]] | None,
                   emit: Callable[[ev.Event], Awaitable[None]], stream: bool,
                   record: TurnRecord, *, opens: bool) -> loop.LoopEnv:
        """The loop's environment; ``opens``: the turn's first commit opens it (it carries
        the pending summaries, now consumed), else it resumes a waiting turn."""
        all_tools = await self.all_tools(adapter)
        config = self.artifact.doc.adapter(adapter)
        tools = self._by_policy(adapter, all_tools)
        first = {"commit": opens}

        async def commit(messages: list[dict[str, Any]], answer: str | None = None) -> None:
            self.conversation.commit(adapter, messages, opened=first["commit"])
            first["commit"] = False
            if answer is not None:
                record.answer = answer  # stored with the checkpoint that stores the answer
            await self._checkpoint(record)

        context = ToolContext(adapter=adapter, session_id=self.conversation.id,
                              artifact=self.artifact, resources=self.resources,
                              sandbox_pool=self.sandbox_pool)
        return loop.LoopEnv(
            engine=self.engine, adapter=adapter, config=config, tools=tools,
            all_tools=all_tools, client_tools=_client_tools(client_tools), context=context,
            emit=emit, commit=commit, plugin_hook=self.plugins.hook,
            command_hooks=self.artifact.doc.hooks, base_dir=self.artifact.base_dir,
            approve=self.approve, stream=stream, new_id=self.call_ids or new_call_id)

    def _emitter(self, on_event: ev.OnEvent | None,
                 result: TurnResult) -> Callable[[ev.Event], Awaitable[None]]:
        async def emit(event: ev.Event) -> None:
            result.events.append(event)
            if isinstance(event, ev.ModelCalled):
                ev.add_usage(result.usage, event.usage)
            if on_event is not None:
                await maybe_await(on_event(event))

        return emit

    async def _checkpoint(self, record: TurnRecord) -> None:
        if self.checkpoint is not None:
            await self.checkpoint(self.conversation, record)


def _client_tools(tools: list[dict[str, Any]] | None) -> dict[str, dict[str, Any]]:
    """Client-provided OpenAI ``tools`` entries by function name."""
    out: dict[str, dict[str, Any]] = {}
    for entry in tools or []:
        function = entry.get("function") if isinstance(entry, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            out[function["name"]] = entry
    return out



async def _decided(emit: Callable[[ev.Event], Awaitable[None]],
                   decision: ev.RouteDecided) -> ev.RouteDecided:
    await emit(decision)
    return decision
