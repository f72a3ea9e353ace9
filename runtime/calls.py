"""One tool call of the loop: policy, argument parsing, plugin and command hooks, a person's
approval for an ``ask`` tool, the tool itself, then the hooks after it. A failure at any
step becomes a result the model reads, never an exception.

A person who answers after the turn (an approver's ``LATER``: ``mol serve``'s API clients)
leaves the call open: ``execute`` returns the call as the person is asked about it instead
of a result, the loop ends the turn waiting, and ``resume`` finishes the call with the
answer when it comes (the tool and the hooks after it, or the refusal), on the adapter that
issued it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import anyio

from mol.core import events as ev
from mol.core import tracing
from mol.core.tools import (
    Approval,
    Later,
    Tool,
    ToolResult,
    parse_arguments,
    run_tool,
    to_result,
)
from mol.runtime import lifecycle
from mol.runtime.engine import ToolCall
from mol.runtime.hooks import (
    Block,
    PluginFailed,
    ToolCallInfo,
    Verdict,
    apply,
    call_plugin,
)
from mol.runtime.loopio import LoopConfig, LoopHost, LoopOutcome
from mol.runtime.policy import decide

MAX_PARALLEL_TOOLS = 8
"""Tool calls of one model reply that run at the same time."""

async def execute_all(cfg: LoopConfig, host: LoopHost, calls: list[tuple[str, ToolCall]],
                       outcome: LoopOutcome) -> list[dict[str, Any]]:
    """Run tool calls concurrently (bounded); results keep the calls' order."""
    results: list[dict[str, Any] | None] = [None] * len(calls)
    limiter = anyio.CapacityLimiter(MAX_PARALLEL_TOOLS)

    async def one(index: int, call_id: str, call: ToolCall) -> None:
        async with limiter:
            result = await execute(cfg, host, call_id, call)
        if isinstance(result, ToolCallInfo):  # open until the person answers
            outcome.asked.append(result)
            return
        results[index] = {"role": "tool", "tool_call_id": call_id, "content": result.content}

    async with anyio.create_task_group() as group:
        for index, (call_id, call) in enumerate(calls):
            outcome.tools_used.append(call.name)
            group.start_soon(one, index, call_id, call)
    return [r for r in results if r is not None]


async def execute(cfg: LoopConfig, host: LoopHost, call_id: str,
                  call: ToolCall) -> ToolResult | ToolCallInfo:
    """Run one tool call through policy and hooks; failures become results the model reads.
    A ``ToolCallInfo`` (the call as the person is asked about it, after the hooks): the
    call waits for a person's answer after the turn (``resume``). The call is an
    ``execute_tool`` span when tracing is on (``mol.core.tracing``)."""
    with _traced(cfg, call_id, call.name):
        await host.emit(ev.ToolCalled(cfg.adapter, call_id, call.name, call.arguments))
        result = await _guarded(cfg, host, call_id, call)
        if isinstance(result, ToolCallInfo):
            return result
        await host.emit(ev.ToolReturned(cfg.adapter, call_id, call.name, result.content,
                                       result.is_error))
    return result


async def resume(cfg: LoopConfig, host: LoopHost, call: ToolCallInfo,
                 answer: Approval) -> ToolResult:
    """Finish ``call``, which ``execute`` left open for a person's answer: with ``answer``
    told (``LoopHost.answered``), the tool runs with the arguments the person was shown,
    then the hooks after it; or the adapter reads the refusal. Traced as ``execute`` is, an
    ``execute_tool`` span of the turn that resumes it."""
    tool = cfg.tools.get(call.name)
    with _traced(cfg, call.call_id, call.name, call.source):
        await host.answered(call, answer)
        result = _refusal(call, answer)
        if result is None and tool is None:  # the artifact changed while the call waited
            result = ToolResult(f"Error: {call.name} was not run: it is no longer available "
                                "to you.", is_error=True)
        elif result is None and tool is not None:
            context = dataclasses.replace(cfg.context, call_id=call.call_id)
            result = await _run(dataclasses.replace(cfg, context=context), host, tool, call)
        assert result is not None
        await host.emit(ev.ToolReturned(cfg.adapter, call.call_id, call.name, result.content,
                                       result.is_error))
    return result


def _traced(cfg: LoopConfig, call_id: str, name: str, source: str = "") -> Any:
    """The ``execute_tool`` span of a call of ``name`` (a no-op scope when nothing traces);
    ``source`` where the tool is no longer offered."""
    tool = cfg.tools.get(name)
    return tracing.span("tool", adapter=cfg.adapter, call_id=call_id, tool=name,
                        source=tool.source if tool else source,
                        description=tool.description if tool else "")


def _refusal(call: ToolCallInfo, answer: Approval | None) -> ToolResult | None:
    """The result of a call of an ``ask`` tool nobody allowed (None: it was allowed)."""
    if answer is not None and answer.allow:
        return None
    reason = ("it needs approval and nobody can approve in this session"
              if answer is None else "the user did not approve it"
              + (f": {answer.reason}" if answer.reason else ""))
    return ToolResult(f"Error: {call.name} was not run: {reason}.", is_error=True)


async def _run(cfg: LoopConfig, host: LoopHost, tool: Tool, info: ToolCallInfo) -> ToolResult:
    result = await run_tool(tool, info.arguments, cfg.context)
    return await _after(cfg, host, info, result)


async def _guarded(cfg: LoopConfig, host: LoopHost, call_id: str,
                   call: ToolCall) -> ToolResult | ToolCallInfo:
    tool = cfg.tools.get(call.name)
    if tool is None:
        if call.name in cfg.all_tools:
            return ToolResult(f"Error: tool {call.name!r} is not available to you "
                              "(not allowed by policy).", is_error=True)
        names = ", ".join(sorted(cfg.tools)) or "none"
        return ToolResult(f"Error: unknown tool {call.name!r}. Available tools: {names}.",
                          is_error=True)
    try:
        arguments = parse_arguments(call.arguments)
    except ValueError as exc:
        return ToolResult(f"Error: {exc}", is_error=True)
    info = ToolCallInfo(call.name, arguments, call_id, cfg.adapter, tool.source)
    # The call's own context: hooks and the tool see which call they serve.
    cfg = dataclasses.replace(cfg, context=dataclasses.replace(cfg.context, call_id=call_id))
    verdict = await _before(cfg, host, info)
    if verdict.blocked is not None:
        return ToolResult(f"Error: the call was blocked: {verdict.blocked}", is_error=True)
    if verdict.arguments is not None:  # what the person is shown is what runs
        info = dataclasses.replace(info, arguments=verdict.arguments)
    if decide(call.name, cfg.config) == "ask" and not verdict.approved:
        answer = await host.approve(info)
        if isinstance(answer, Later):
            return info
        refused = _refusal(info, answer)
        if refused is not None:
            return refused
    return await _run(cfg, host, tool, info)


def _tool_payload(cfg: LoopConfig, event: str, info: ToolCallInfo, **extra: Any) -> dict[str, Any]:
    return lifecycle.base_payload(event, cfg.context.session_id, tool_name=info.name,
                                  tool_input=info.arguments, tool_use_id=info.call_id,
                                  adapter=info.adapter, **extra)


async def _before(cfg: LoopConfig, host: LoopHost, info: ToolCallInfo) -> Verdict:
    verdict = Verdict()
    for impl in cfg.tool_hooks.before:
        outcome = await call_plugin(impl, "mol_before_tool_call", call=info,
                                    context=cfg.context)
        if isinstance(outcome, PluginFailed):  # a guard that fails must not let it pass
            outcome = Block(str(outcome))
        if not apply(verdict, "plugin", outcome):
            break
        if verdict.arguments is not None:
            info = dataclasses.replace(info, arguments=verdict.arguments)
    for hook, decision, reason in verdict.decisions:
        await host.emit(ev.HookDecided(hook, info.name, decision, reason,
                                      call_id=info.call_id))
    if verdict.blocked is None:
        command = await lifecycle.fire(cfg.hook_sets, "PreToolUse",
                                       _tool_payload(cfg, "PreToolUse", info), host.emit,
                                       subject=info.name, adapter=cfg.adapter, tool=info.name,
                                       call_id=info.call_id)
        verdict.blocked = command.blocked
        verdict.arguments = command.arguments or verdict.arguments
        verdict.approved = verdict.approved or command.approved
    return verdict


async def _after(cfg: LoopConfig, host: LoopHost, info: ToolCallInfo,
                 result: ToolResult) -> ToolResult:
    for impl in cfg.tool_hooks.after:
        replaced = await call_plugin(impl, "mol_after_tool_call", call=info, result=result,
                                     context=cfg.context)
        if isinstance(replaced, PluginFailed):
            result = ToolResult(f"Error: the result was withheld: {replaced}", is_error=True)
        elif replaced is not None:
            result = to_result(replaced)
    response = {"content": result.content, "is_error": result.is_error}
    verdict = await lifecycle.fire(cfg.hook_sets, "PostToolUse",
                                   _tool_payload(cfg, "PostToolUse", info, tool_response=response),
                                   host.emit, subject=info.name, adapter=cfg.adapter,
                                   tool=info.name, call_id=info.call_id)
    if verdict.blocked is not None:
        return ToolResult(f"Error: the result was withheld by a hook: {verdict.blocked}",
                          is_error=True)
    return result
