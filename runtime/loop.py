"""The agent loop: model -> tool calls -> results (pinned to the caller) -> model -> answer.

Runs on one adapter's view until the model answers without tool calls, the
adapter's ``max_steps`` or token budget is reached, or the model calls a tool
the client provides (the turn then waits for the client's results). Messages
are committed to the view only at consistent points (an answer, or a tool-call
message together with all its results), so a cancelled turn never leaves a
half-written view.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from mol.hcp.schema import AdapterConfig
from mol.runtime import events as ev
from mol.runtime.engine import Completion, Delta, Engine, ToolCall
from mol.runtime.hooks import (
    Block,
    PluginFailed,
    ToolCallInfo,
    Verdict,
    apply,
    call_plugin,
    plugin_impls,
    run_command_hooks,
)
from mol.runtime.policy import decide
from mol.runtime.tools import Tool, ToolContext, ToolResult, parse_arguments, run_tool, to_result
from mol.runtime.views import new_call_id

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
    command_hooks: Any = None
    """The artifact's ``HooksConfig``."""
    base_dir: Any = None
    approve: Approver | None = None
    stream: bool = False


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
    view = list(view)  # a snapshot: commits extend the conversation's own list
    specs = tool_specs(env)
    params = env.config.params.model_dump(exclude_none=True)
    steps = 0
    while True:
        if steps >= env.config.max_steps:
            return await _stop(env, pending, outcome, "max_steps")
        budget = env.config.max_turn_tokens
        if budget is not None and outcome.tokens >= budget:
            return await _stop(env, pending, outcome, "token_budget")
        completion, streamed_ids = await _ask(env, view + pending, specs, params)
        steps += 1
        outcome.tokens += completion.usage.prompt_tokens + completion.usage.completion_tokens
        # Calls come sorted by stream index; keep the ids already streamed to the client.
        given = [streamed_ids[index] for index in sorted(streamed_ids)]
        calls = [(given[k] if k < len(given) else new_call_id(env.adapter), call)
                 for k, call in enumerate(completion.tool_calls)]
        message: dict[str, Any] = {"role": "assistant", "content": completion.content or None}
        if not calls:
            message["content"] = completion.content
            outcome.answer = completion.content
            await env.commit([*pending, message], answer=outcome.answer)
            return outcome
        message["tool_calls"] = [
            {"id": call_id, "type": "function",
             "function": {"name": call.name, "arguments": call.arguments}}
            for call_id, call in calls]
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
            await env.emit(ev.ClientToolsRequested(env.adapter, outcome.client_calls))
            return outcome


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
    ids: dict[int, str] = {}
    client_index: dict[int, int] = {}

    async def on_delta(delta: Delta) -> None:
        if delta.text:
            await env.emit(ev.TextDelta(env.adapter, delta.text))
        if delta.tool_index is None:
            return
        first = delta.tool_index not in ids
        if first:
            ids[delta.tool_index] = new_call_id(env.adapter)
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
    if verdict.blocked is None and env.command_hooks is not None:
        command = await run_command_hooks(env.command_hooks.PreToolUse, "PreToolUse", info,
                                          env.base_dir, env.context.session_id)
        verdict.blocked = command.blocked
        verdict.arguments = command.arguments or verdict.arguments
        verdict.approved = verdict.approved or command.approved
        verdict.decisions += command.decisions
    for hook, decision, reason in verdict.decisions:
        await env.emit(ev.HookDecided(hook, info.name, decision, reason))
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
    if env.command_hooks is not None and env.command_hooks.PostToolUse:
        extra = {"tool_response": {"content": result.content, "is_error": result.is_error}}
        verdict = await run_command_hooks(env.command_hooks.PostToolUse, "PostToolUse", info,
                                          env.base_dir, env.context.session_id, extra)
        for hook, decision, reason in verdict.decisions:
            await env.emit(ev.HookDecided(hook, info.name, decision, reason))
        if verdict.blocked is not None:
            return ToolResult(f"Error: the result was withheld by a hook: {verdict.blocked}",
                              is_error=True)
    return result
