"""The agent loop: model -> tool calls -> results (pinned to the caller) -> model -> answer.

Runs on one adapter's view until the model answers without tool calls (and the
answer's reviewer, if any, accepts it), the adapter's ``max_steps`` or token
budget is reached, or the model calls a tool the client provides (the turn then
waits for the client's results). Messages are committed to the view only at
consistent points (an answer, or a tool-call message together with all its
results), so a cancelled turn never leaves a half-written view; an answer sent
back for revision stays pending, with its feedback, until one of those points.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from mol.core import events as ev
from mol.core.tools import Tool, ToolContext, ToolResult, parse_arguments, run_tool, to_result
from mol.hcp.schema import AdapterConfig
from mol.runtime import lifecycle
from mol.runtime.engine import Completion, Delta, Engine, ToolCall
from mol.runtime.hooks import (
    Block,
    HookSet,
    PluginFailed,
    ToolCallInfo,
    Verdict,
    apply,
    call_plugin,
    plugin_impls,
)
from mol.runtime.policy import decide
from mol.runtime.views import check_steps, new_call_id

MAX_PARALLEL_TOOLS = 8
"""Tool calls of one model reply that run at the same time."""

Approver = Callable[[ToolCallInfo], Awaitable[bool]]


@dataclass
class LoopOutcome:
    """How a run of the loop ended."""

    answer: str = ""
    stopped: str = ""
    """Empty for a normal answer; ``max_steps``, ``token_budget`` or ``client_tools``."""
    client_calls: list[dict[str, Any]] = field(default_factory=list)
    tools_used: list[str] = field(default_factory=list)
    tokens: int = 0
    stop_hook_active: bool = False
    """A Stop hook already made this turn go on (Claude Code's ``stop_hook_active``)."""
    reasoning: str = ""
    """The engine's reasoning on the last reply (the answer, or the client tool calls)."""


@dataclass
class LoopEnv:
    """What the loop needs around it, supplied by the harness."""

    engine: Engine
    adapter: str
    config: AdapterConfig
    tools: dict[str, Tool]
    """Runtime tools visible to this adapter (policy already applied)."""
    all_tools: dict[str, Tool]
    """Every runtime tool, to tell a hidden tool from an unknown one."""
    client_tools: dict[str, dict[str, Any]]
    """Tools the client provides (OpenAI ``tools`` entries by name); their calls go back to it."""
    context: ToolContext
    emit: Callable[[ev.Event], Awaitable[None]]
    commit: Callable[..., Awaitable[None]]
    """``await commit(messages, answer=None)``: append to the view at a consistent point;
    ``answer`` is the turn's final answer when these messages end it."""
    plugin_hook: Any = None
    hook_sets: list[HookSet] = field(default_factory=list)
    """The command hooks that run for this adapter (``mol.runtime.lifecycle.hook_sets``)."""
    approve: Approver | None = None
    stream: bool = False
    review: Callable[[str], Awaitable[str | None]] | None = None
    """``await review(answer)``: feedback that sends the answer back for revision (a user
    message; the answer and it are appended, never replacing anything), or None to accept
    it. The GenUI repair rounds (``mol.genui.review``) use it."""
    overrides: dict[str, Any] = field(default_factory=dict)
    """The client's sampling parameters for this turn (``answer_params``)."""
    new_id: Callable[[str], str] = new_call_id
    """Issues the mol id of a tool call (random unless the harness was given ``call_ids``)."""


FIRST_STEP_ONLY = ("tool_choice",)
"""Client parameters for the turn's first model call only: a forced tool choice repeated
after the tool's result would call it again and again."""
TOOLS_ONLY = ("tool_choice", "parallel_tool_calls")
"""Parameters an engine refuses on a request without tools."""


def answer_params(config: AdapterConfig, overrides: dict[str, Any]) -> dict[str, Any]:
    """The adapter's ``params`` with the client's on top; a client's ``max_tokens`` is
    clamped to the adapter's."""
    params = config.params.model_dump(exclude_none=True)
    for key, value in overrides.items():
        if key == "max_tokens" and params.get("max_tokens") is not None:
            value = min(value, params["max_tokens"])
        params[key] = value
    return params


def tool_specs(env: LoopEnv) -> list[dict[str, Any]]:
    """The ``tools`` request field: runtime tools then client tools, each sorted by name."""
    specs = [env.tools[name].spec() for name in sorted(env.tools)]
    specs += [env.client_tools[name] for name in sorted(env.client_tools)
              if name not in env.tools]
    return specs


async def run(env: LoopEnv, view: list[dict[str, Any]], pending: list[dict[str, Any]],
              outcome: LoopOutcome | None = None) -> LoopOutcome:
    """Run the loop on ``view`` + ``pending`` (uncommitted messages that open or resume it)."""
    outcome = outcome or LoopOutcome()
    env = _charging(env, outcome)
    view = list(view)  # a snapshot: commits extend the conversation's own list
    specs = tool_specs(env)
    params = answer_params(env.config, env.overrides)
    if not specs:
        params = {k: v for k, v in params.items() if k not in TOOLS_ONLY}
    steps = 0
    while True:
        if steps >= env.config.max_steps:
            return await _stop(env, pending, outcome, "max_steps")
        budget = env.config.max_turn_tokens
        if budget is not None and outcome.tokens >= budget:
            return await _stop(env, pending, outcome, "token_budget")
        completion, streamed_ids = await _ask(env, view + pending, specs, params)
        params = {k: v for k, v in params.items() if k not in FIRST_STEP_ONLY}
        steps += 1
        outcome.reasoning = completion.reasoning
        outcome.tokens += completion.usage.prompt_tokens + completion.usage.completion_tokens
        # Calls come sorted by stream index; keep the ids already streamed to the client.
        given = [streamed_ids[index] for index in sorted(streamed_ids)]
        calls = [(given[k] if k < len(given) else env.new_id(env.adapter), call)
                 for k, call in enumerate(completion.tool_calls)]
        message = _assistant_message(env, completion, calls)
        if not calls:
            feedback = await env.review(completion.content) if env.review else None
            if feedback is not None:  # sent back for revision: pending until a commit point
                pending = [*pending, message, {"role": "user", "content": feedback}]
                continue
            go_on = await _stop_hooks(env, completion.content, outcome)
            if go_on is not None:  # a Stop hook keeps the adapter working
                await env.commit([*pending, message, go_on])
                view, pending = view + pending + [message, go_on], []
                continue
            outcome.answer = completion.content
            await env.commit([*pending, message], answer=outcome.answer)
            return outcome
        # A name the runtime provides runs here even if the client offers it too.
        to_client = [c.name in env.client_tools and c.name not in env.tools for _, c in calls]
        runtime_calls = [pair for pair, client in zip(calls, to_client, strict=True) if not client]
        client_calls = [pair for pair, client in zip(calls, to_client, strict=True) if client]
        results = await _execute_all(env, runtime_calls, outcome)
        await env.commit([*pending, message, *results])
        view = view + pending + [message, *results]
        pending = []
        if client_calls:
            outcome.client_calls = [
                {"id": i, "type": "function",
                 "function": {"name": c.name, "arguments": c.arguments}} for i, c in client_calls]
            outcome.stopped = "client_tools"
            await env.emit(ev.ClientToolsRequested(env.adapter, outcome.client_calls,
                                                   outcome.reasoning))
            return outcome


def _assistant_message(env: LoopEnv, completion: Completion,
                       calls: list[tuple[str, ToolCall]]) -> dict[str, Any]:
    """The reply as the view keeps it (its key order is part of the view's bytes)."""
    message: dict[str, Any] = {"role": "assistant",
                               "content": (completion.content or None) if calls
                               else completion.content}
    if env.config.keep_reasoning and completion.reasoning:
        message["reasoning_content"] = completion.reasoning
    if calls:
        message["tool_calls"] = [
            {"id": call_id, "type": "function",
             "function": {"name": call.name, "arguments": call.arguments}}
            for call_id, call in calls]
    return message


async def _stop_hooks(env: LoopEnv, answer: str, outcome: LoopOutcome) -> dict[str, Any] | None:
    """The instruction a ``Stop`` hook blocked the end of the turn with, as a user message
    (None: the turn may end)."""
    verdict = await lifecycle.stop(env.hook_sets, env.context.session_id, env.adapter, answer,
                                   outcome.stop_hook_active, env.emit)
    if verdict.blocked is None:
        return None
    outcome.stop_hook_active = True
    return {"role": "user", "content": f"[Stop hook] {verdict.blocked}"}


def _charging(env: LoopEnv, outcome: LoopOutcome) -> LoopEnv:
    """``env`` whose tools' events go to the turn, their model calls (an MCP server's
    sampling) charged to the turn's token budget."""
    async def emit(event: ev.Event) -> None:
        if isinstance(event, ev.ModelCalled):
            outcome.tokens += (event.usage.get("prompt_tokens") or 0) + (
                event.usage.get("completion_tokens") or 0)
        await env.emit(event)

    return dataclasses.replace(env, context=dataclasses.replace(env.context, emit=emit))


async def _stop(env: LoopEnv, pending: list[dict[str, Any]], outcome: LoopOutcome,
                why: str) -> LoopOutcome:
    limit = (f"{env.config.max_steps} steps" if why == "max_steps"
             else f"the turn's budget of {env.config.max_turn_tokens} tokens")
    outcome.stopped = why
    outcome.answer = f"[mol: stopped after {limit} before the task was finished]"
    await env.commit(pending, answer=outcome.answer)
    return outcome


async def _ask(env: LoopEnv, messages: list[dict[str, Any]], specs: list[dict[str, Any]],
               params: dict[str, Any]) -> tuple[Completion, dict[int, str]]:
    """One model call; returns the completion and the mol ids already given (while
    streaming) to the calls at those indices."""
    # The engine is never sent a call without its results, nor a result without its call.
    check_steps(messages, where=f"the request of {env.adapter}")
    ids: dict[int, str] = {}
    client_index: dict[int, int] = {}

    async def on_delta(delta: Delta) -> None:
        if delta.reasoning:
            await env.emit(ev.ReasoningDelta(env.adapter, delta.reasoning))
        if delta.text:
            await env.emit(ev.TextDelta(env.adapter, delta.text))
        if delta.tool_index is None:
            return
        first = delta.tool_index not in ids
        if first:
            ids[delta.tool_index] = env.new_id(env.adapter)
            if delta.tool_name in env.client_tools and delta.tool_name not in env.tools:
                client_index[delta.tool_index] = len(client_index)
        if delta.tool_index in client_index:  # the client will run it: stream it as it comes
            await env.emit(ev.ToolCallDelta(
                env.adapter, client_index[delta.tool_index],
                ids[delta.tool_index] if first else None, delta.tool_name if first else None,
                delta.tool_arguments))

    completion = await env.engine.complete(
        env.adapter, messages, tools=specs or None, params=params,
        on_delta=on_delta if env.stream else None)
    await env.emit(ev.ModelCalled(env.adapter, "answer", completion.usage.to_dict(),
                                  round(completion.duration, 6)))
    return completion, ids


async def _execute_all(env: LoopEnv, calls: list[tuple[str, ToolCall]],
                       outcome: LoopOutcome) -> list[dict[str, Any]]:
    """Run tool calls concurrently (bounded); results keep the calls' order."""
    results: list[dict[str, Any] | None] = [None] * len(calls)
    limiter = anyio.CapacityLimiter(MAX_PARALLEL_TOOLS)

    async def one(index: int, call_id: str, call: ToolCall) -> None:
        async with limiter:
            result = await execute(env, call_id, call)
        results[index] = {"role": "tool", "tool_call_id": call_id, "content": result.content}

    async with anyio.create_task_group() as group:
        for index, (call_id, call) in enumerate(calls):
            outcome.tools_used.append(call.name)
            group.start_soon(one, index, call_id, call)
    return [r for r in results if r is not None]


async def execute(env: LoopEnv, call_id: str, call: ToolCall) -> ToolResult:
    """Run one tool call through policy and hooks; failures become results the model reads."""
    await env.emit(ev.ToolCalled(env.adapter, call_id, call.name, call.arguments))
    result = await _guarded(env, call_id, call)
    await env.emit(ev.ToolReturned(env.adapter, call_id, call.name, result.content,
                                   result.is_error))
    return result


async def _guarded(env: LoopEnv, call_id: str, call: ToolCall) -> ToolResult:
    tool = env.tools.get(call.name)
    if tool is None:
        if call.name in env.all_tools:
            return ToolResult(f"Error: tool {call.name!r} is not available to you "
                              "(not allowed by policy).", is_error=True)
        names = ", ".join(sorted(env.tools)) or "none"
        return ToolResult(f"Error: unknown tool {call.name!r}. Available tools: {names}.",
                          is_error=True)
    try:
        arguments = parse_arguments(call.arguments)
    except ValueError as exc:
        return ToolResult(f"Error: {exc}", is_error=True)
    info = ToolCallInfo(call.name, arguments, call_id, env.adapter)
    # The call's own context: hooks and the tool see which call they serve.
    env = dataclasses.replace(env, context=dataclasses.replace(env.context, call_id=call_id))
    verdict = await _before(env, info)
    if verdict.blocked is not None:
        return ToolResult(f"Error: the call was blocked: {verdict.blocked}", is_error=True)
    if verdict.arguments is not None:
        info = ToolCallInfo(call.name, verdict.arguments, call_id, env.adapter)
    if decide(call.name, env.config) == "ask" and not verdict.approved:
        approved = await env.approve(info) if env.approve is not None else False
        if not approved:
            reason = ("it needs approval and nobody can approve in this session"
                      if env.approve is None else "the user did not approve it")
            return ToolResult(f"Error: {call.name} was not run: {reason}.", is_error=True)
    result = await run_tool(tool, info.arguments, env.context)
    return await _after(env, info, result)


def _tool_payload(env: LoopEnv, event: str, info: ToolCallInfo, **extra: Any) -> dict[str, Any]:
    return lifecycle.base_payload(event, env.context.session_id, tool_name=info.name,
                                  tool_input=info.arguments, tool_use_id=info.call_id,
                                  adapter=info.adapter, **extra)


async def _before(env: LoopEnv, info: ToolCallInfo) -> Verdict:
    verdict = Verdict()
    if env.plugin_hook is not None:
        for impl in plugin_impls(env.plugin_hook.mol_before_tool_call):
            outcome = await call_plugin(impl, "mol_before_tool_call", call=info,
                                        context=env.context)
            if isinstance(outcome, PluginFailed):  # a guard that fails must not let it pass
                outcome = Block(str(outcome))
            if not apply(verdict, "plugin", outcome):
                break
            if verdict.arguments is not None:
                info = ToolCallInfo(info.name, verdict.arguments, info.call_id, info.adapter)
    for hook, decision, reason in verdict.decisions:
        await env.emit(ev.HookDecided(hook, info.name, decision, reason,
                                      call_id=info.call_id))
    if verdict.blocked is None:
        command = await lifecycle.fire(env.hook_sets, "PreToolUse",
                                       _tool_payload(env, "PreToolUse", info), env.emit,
                                       subject=info.name, adapter=env.adapter, tool=info.name,
                                       call_id=info.call_id)
        verdict.blocked = command.blocked
        verdict.arguments = command.arguments or verdict.arguments
        verdict.approved = verdict.approved or command.approved
    return verdict


async def _after(env: LoopEnv, info: ToolCallInfo, result: ToolResult) -> ToolResult:
    if env.plugin_hook is not None:
        for impl in plugin_impls(env.plugin_hook.mol_after_tool_call):
            replaced = await call_plugin(impl, "mol_after_tool_call", call=info, result=result,
                                         context=env.context)
            if isinstance(replaced, PluginFailed):
                result = ToolResult(f"Error: the result was withheld: {replaced}", is_error=True)
            elif replaced is not None:
                result = to_result(replaced)
    response = {"content": result.content, "is_error": result.is_error}
    verdict = await lifecycle.fire(env.hook_sets, "PostToolUse",
                                   _tool_payload(env, "PostToolUse", info, tool_response=response),
                                   env.emit, subject=info.name, adapter=env.adapter,
                                   tool=info.name, call_id=info.call_id)
    if verdict.blocked is not None:
        return ToolResult(f"Error: the result was withheld by a hook: {verdict.blocked}",
                          is_error=True)
    return result
