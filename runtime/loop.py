"""The agent loop: model -> tool calls -> results (pinned to the caller) -> model -> answer.

Runs on one adapter's view until the model answers without tool calls (and the
answer's reviewer, if any, accepts it), the adapter's ``max_steps`` or token
budget is reached, or the model calls a tool the client provides or an ``ask`` tool a
person answers after the turn (the turn then waits for the client's results or the
person's answers). Messages are committed to the view only at
consistent points (an answer, or a tool-call message together with all its
results), so a cancelled turn never leaves a half-written view; an answer sent
back for revision stays pending, with its feedback, until one of those points.
The loop is given a ``LoopConfig`` and calls back its ``LoopHost`` (``mol.runtime.loopio``);
each tool call runs through ``mol.runtime.calls``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from mol.core import events as ev
from mol.core.errors import EngineContextLength
from mol.hcp.schema import AdapterConfig
from mol.runtime import lifecycle
from mol.runtime.calls import execute_all
from mol.runtime.engine import Completion, Delta, ToolCall
from mol.runtime.hooks import ToolCallInfo
from mol.runtime.loopio import LoopConfig, LoopHost, LoopOutcome
from mol.runtime.views import check_steps

__all__ = ["LoopConfig", "LoopHost", "LoopOutcome", "answer_params", "asked_calls",
           "first_request", "run",
           "tool_specs"]

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


def tool_specs(cfg: LoopConfig) -> list[dict[str, Any]]:
    """The ``tools`` request field: runtime tools then client tools, each sorted by name."""
    specs = [cfg.tools[name].spec() for name in sorted(cfg.tools)]
    specs += [cfg.client_tools[name] for name in sorted(cfg.client_tools)
              if name not in cfg.tools]
    return specs


def first_params(cfg: LoopConfig, specs: list[dict[str, Any]]) -> dict[str, Any]:
    """The parameters of the loop's first request (``answer_params``, without the
    tool-only ones when there are no tools)."""
    params = answer_params(cfg.config, cfg.overrides)
    return params if specs else {k: v for k, v in params.items() if k not in TOOLS_ONLY}


def first_request(cfg: LoopConfig, view: list[dict[str, Any]], pending: list[dict[str, Any]]
                  ) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None, dict[str, Any]]:
    """``(messages, tools, params)`` of the loop's first request on ``view + pending`` when
    no compaction intervenes: what a speculative answer asks (``mol.runtime.speculation``)."""
    specs = tool_specs(cfg)
    return view + pending, specs or None, first_params(cfg, specs)


async def run(cfg: LoopConfig, host: LoopHost, view: list[dict[str, Any]],
              pending: list[dict[str, Any]],
              outcome: LoopOutcome | None = None) -> LoopOutcome:
    """Run the loop on ``view`` + ``pending`` (uncommitted messages that open or resume it)."""
    outcome = outcome or LoopOutcome()
    cfg = _charging(cfg, host, outcome)
    view = list(view)  # a snapshot: commits extend the conversation's own list
    specs = tool_specs(cfg)
    params = first_params(cfg, specs)
    steps = 0
    while True:
        if steps >= cfg.config.max_steps:
            return await _stop(cfg, host, pending, outcome, "max_steps")
        budget = cfg.config.max_turn_tokens
        if budget is not None and outcome.tokens >= budget:
            return await _stop(cfg, host, pending, outcome, "token_budget")
        view, completion, streamed_ids = await _fitted(cfg, host, view, pending, specs, params)
        params = {k: v for k, v in params.items() if k not in FIRST_STEP_ONLY}
        steps += 1
        outcome.reasoning = completion.reasoning
        outcome.tokens += completion.usage.prompt_tokens + completion.usage.completion_tokens
        # Calls come sorted by stream index; keep the ids already streamed to the client.
        given = [streamed_ids[index] for index in sorted(streamed_ids)]
        calls = [(given[k] if k < len(given) else host.new_id(cfg.adapter), call)
                 for k, call in enumerate(completion.tool_calls)]
        message = _assistant_message(cfg, completion, calls)
        if not calls:
            feedback = await host.review(completion.content)
            if feedback is not None:  # sent back for revision: pending until a commit point
                pending = [*pending, message, {"role": "user", "content": feedback}]
                continue
            go_on = await _stop_hooks(cfg, host, completion.content, outcome)
            if go_on is not None:  # a Stop hook keeps the adapter working
                await host.commit([*pending, message, go_on])
                view, pending = view + pending + [message, go_on], []
                continue
            outcome.answer = completion.content
            outcome.finish_reason = completion.finish_reason or ""
            outcome.stop_sequence = completion.stop_sequence or ""
            await host.commit([*pending, message], answer=outcome.answer)
            return outcome
        # A name the runtime provides runs here even if the client offers it too.
        to_client = [c.name in cfg.client_tools and c.name not in cfg.tools for _, c in calls]
        runtime_calls = [pair for pair, client in zip(calls, to_client, strict=True) if not client]
        client_calls = [pair for pair, client in zip(calls, to_client, strict=True) if client]
        results = await execute_all(cfg, host, runtime_calls, outcome)
        waiting = bool(client_calls or outcome.asked)  # calls left open: the client answers
        await host.commit([*pending, message, *results], waiting=waiting)
        view = view + pending + [message, *results]
        pending = []
        if waiting:
            outcome.client_calls = [
                {"id": i, "type": "function",
                 "function": {"name": c.name, "arguments": c.arguments}} for i, c in client_calls]
            outcome.stopped = "client_tools"
            await host.emit(ev.ClientToolsRequested(
                cfg.adapter, outcome.client_calls, outcome.reasoning, asked_calls(outcome.asked)))
            return outcome


def asked_calls(calls: list[ToolCallInfo]) -> list[dict[str, Any]]:
    """The calls left open for a person's approval, as ``ClientToolsRequested.asked``."""
    return [{"id": c.call_id, "name": c.name, "arguments": c.arguments, "source": c.source}
            for c in calls]


def _assistant_message(cfg: LoopConfig, completion: Completion,
                       calls: list[tuple[str, ToolCall]]) -> dict[str, Any]:
    """The reply as the view keeps it (its key order is part of the view's bytes)."""
    message: dict[str, Any] = {"role": "assistant",
                               "content": (completion.content or None) if calls
                               else completion.content}
    if cfg.config.keep_reasoning and completion.reasoning:
        message["reasoning_content"] = completion.reasoning
    if calls:
        message["tool_calls"] = [
            {"id": call_id, "type": "function",
             "function": {"name": call.name, "arguments": call.arguments}}
            for call_id, call in calls]
    return message


async def _stop_hooks(cfg: LoopConfig, host: LoopHost, answer: str,
                     outcome: LoopOutcome) -> dict[str, Any] | None:
    """The instruction a ``Stop`` hook blocked the end of the turn with, as a user message
    (None: the turn may end)."""
    verdict = await lifecycle.stop(cfg.hook_sets, cfg.context.session_id, cfg.adapter, answer,
                                   outcome.stop_hook_active, host.emit)
    if verdict.blocked is None:
        return None
    outcome.stop_hook_active = True
    return {"role": "user", "content": f"[Stop hook] {verdict.blocked}"}


def _charging(cfg: LoopConfig, host: LoopHost, outcome: LoopOutcome) -> LoopConfig:
    """``cfg`` whose tools' events go to the turn, their model calls (an MCP server's
    sampling) charged to the turn's token budget."""
    async def emit(event: ev.Event) -> None:
        if isinstance(event, ev.ModelCalled):
            outcome.tokens += (event.usage.get("prompt_tokens") or 0) + (
                event.usage.get("completion_tokens") or 0)
        await host.emit(event)

    return dataclasses.replace(cfg, context=dataclasses.replace(cfg.context, emit=emit))


async def _stop(cfg: LoopConfig, host: LoopHost, pending: list[dict[str, Any]],
                outcome: LoopOutcome, why: str) -> LoopOutcome:
    limit = (f"{cfg.config.max_steps} steps" if why == "max_steps"
             else f"the turn's budget of {cfg.config.max_turn_tokens} tokens")
    outcome.stopped = why
    outcome.answer = f"[mol: stopped after {limit} before the task was finished]"
    await host.commit(pending, answer=outcome.answer)
    return outcome


async def _fitted(cfg: LoopConfig, host: LoopHost, view: list[dict[str, Any]],
                  pending: list[dict[str, Any]], specs: list[dict[str, Any]],
                  params: dict[str, Any]
                  ) -> tuple[list[dict[str, Any]], Completion, dict[int, str]]:
    """One model call on ``view + pending``, the view compacted first when the request would
    not fit the adapter's window; when the engine answers that it did not fit all the same,
    compacted once more and asked once more. Returns the view the request was made of."""
    budget = params.get("max_tokens") or 0
    fitted = await host.fit(view, pending, specs or None, budget)
    view = view if fitted is None else fitted
    try:
        completion, ids = await _ask(cfg, host, view + pending, specs, params)
    except EngineContextLength:
        fitted = await host.fit(view, pending, specs or None, budget, overflowed=True)
        if fitted is None:
            raise
        view = fitted
        completion, ids = await _ask(cfg, host, view + pending, specs, params)
    host.measured(view + pending, completion.usage)
    return view, completion, ids


async def _ask(cfg: LoopConfig, host: LoopHost, messages: list[dict[str, Any]],
               specs: list[dict[str, Any]], params: dict[str, Any]
               ) -> tuple[Completion, dict[int, str]]:
    """One model call; returns the completion and the mol ids already given (while
    streaming) to the calls at those indices."""
    # The engine is never sent a call without its results, nor a result without its call.
    check_steps(messages, where=f"the request of {cfg.adapter}")
    ids: dict[int, str] = {}
    client_index: dict[int, int] = {}

    async def on_delta(delta: Delta) -> None:
        if delta.reasoning:
            await host.emit(ev.ReasoningDelta(cfg.adapter, delta.reasoning))
        if delta.text:
            await host.emit(ev.TextDelta(cfg.adapter, delta.text))
        if delta.tool_index is None:
            return
        first = delta.tool_index not in ids
        if first:
            ids[delta.tool_index] = host.new_id(cfg.adapter)
            if delta.tool_name in cfg.client_tools and delta.tool_name not in cfg.tools:
                client_index[delta.tool_index] = len(client_index)
        if delta.tool_index in client_index:  # the client will run it: stream it as it comes
            await host.emit(ev.ToolCallDelta(
                cfg.adapter, client_index[delta.tool_index],
                ids[delta.tool_index] if first else None, delta.tool_name if first else None,
                delta.tool_arguments))

    completion = await cfg.engine.complete(
        cfg.adapter, messages, tools=specs or None, params=params,
        on_delta=on_delta if cfg.stream else None)
    await host.emit(ev.ModelCalled(cfg.adapter, "answer", completion.usage.to_dict(),
                                  round(completion.duration, 6)))
    return completion, ids
