"""What each kind of mol span is named and carries (docs/observability.md has the table).

A scope point (``mol.core.tracing``) names a kind and its facts in mol's words; the kind's
``Shape`` here turns them into the span's name and attributes, and does the same with the
events, notes and end of the span. Attribute names come from ``otel`` (the pinned
conventions) or are mol's own ``mol.*``. Message text (prompts, answers, tool arguments and
results, commands, hook reasons, the router's reply) is written only when the tracer
captures content.
"""

from __future__ import annotations

from typing import Any, Protocol

from mol.core import events as ev
from mol.runtime.tracing import content
from mol.runtime.tracing import otel as sc  # the conventions' names

SANDBOX_PLUGIN = "plugin:mol.plugins.builtin.sandbox"
"""The source of the sandbox's tools (the built-in plugin that registers them)."""


class Sink(Protocol):
    """What a shape writes to: the span (``mol.runtime.tracing.otel.OtelSpan``)."""

    capture: bool

    def set(self, key: str, value: Any) -> None: ...
    def add_event(self, name: str, attributes: dict[str, Any]) -> None: ...
    def fail(self, error_type: str) -> None: ...


class Shape:
    """A kind of span: its name and kind at the start, then what it does with what it is
    told. The base writes nothing."""

    span_kind = "internal"

    def name(self, facts: dict[str, Any]) -> str:
        raise NotImplementedError

    def opened(self, span: Sink, facts: dict[str, Any]) -> None:
        """Attributes known when the span starts."""

    def event(self, span: Sink, event: ev.Event) -> None:
        """An event of the turn while the span was current."""

    def note(self, span: Sink, facts: dict[str, Any]) -> None:
        """Facts the scope learned while the span ran (over those it was opened with)."""

    def ending(self, span: Sink, facts: dict[str, Any]) -> None:
        """Attributes known when the span ends (``facts``: those it was opened with)."""


def _hook(span: Sink, event: ev.HookDecided) -> None:
    attributes = {"mol.hook": event.hook, "mol.hook.event": event.event,
                  "mol.hook.decision": event.decision}
    if span.capture and event.reason:
        attributes["mol.hook.reason"] = event.reason
    span.add_event("mol.hook", attributes)


def _failed(span: Sink, event: ev.Failed) -> None:
    attributes = {"mol.error.where": event.where}
    if span.capture:  # an engine's or a tool's error text may quote what it was sent
        attributes["mol.error.message"] = event.message
    span.add_event("mol.error", attributes)


def _usage(span: Sink, usage: dict[str, Any] | Any) -> None:
    get = usage.get if isinstance(usage, dict) else (lambda key: getattr(usage, key, None))
    span.set(sc.INPUT_TOKENS, get("prompt_tokens") or 0)
    span.set(sc.OUTPUT_TOKENS, get("completion_tokens") or 0)
    if get("cached_tokens") is not None:
        span.set(sc.CACHE_READ_TOKENS, get("cached_tokens"))


class Turn(Shape):
    """``invoke_agent``: one user turn (route, answer, summary), the root of what it does."""

    def name(self, facts: dict[str, Any]) -> str:
        return f"{sc.INVOKE_AGENT} {facts['artifact'].name}"

    def opened(self, span: Sink, facts: dict[str, Any]) -> None:
        artifact = facts["artifact"]
        span.set(sc.OPERATION, sc.INVOKE_AGENT)
        span.set(sc.AGENT_NAME, artifact.name)
        span.set(sc.AGENT_VERSION, artifact.digest)
        span.set("mol.hcp.digest", artifact.digest)
        span.set(sc.CONVERSATION_ID, facts["conversation"])
        span.set(sc.SESSION_ID, facts["conversation"])
        if facts.get("adapter"):
            span.set("mol.route.pinned", facts["adapter"])
        if span.capture and facts.get("text"):
            span.set(sc.INPUT_MESSAGES, content.user_text(facts["text"]))

    def event(self, span: Sink, event: ev.Event) -> None:
        if isinstance(event, ev.RouteDecided):
            attributes = {"mol.route.adapter": event.adapter, "mol.route": event.how,
                          "mol.route.fallback": event.fallback}
            if event.reason:
                attributes["mol.route.reason"] = event.reason
            if span.capture and event.raw:
                attributes["mol.route.raw"] = event.raw
            for key, value in attributes.items():
                span.set(key, value)
            span.add_event("mol.route", attributes)
        elif isinstance(event, ev.Answered):
            span.set("mol.answer.adapter", event.adapter)
            if event.stopped:
                span.set("mol.stopped", event.stopped)
            if event.finish_reason:
                span.set(sc.RESPONSE_FINISH_REASONS, [event.finish_reason])
            if span.capture:
                span.set(sc.OUTPUT_MESSAGES, content.output_message(
                    event.text, [], event.finish_reason, event.reasoning))
        elif isinstance(event, ev.Summarized):
            span.set("mol.summary.adapter", event.adapter)
            span.set("mol.summary.ok", event.ok)
            if span.capture:
                span.set("mol.summary.text", event.text)
        elif isinstance(event, ev.ClientToolsRequested):
            span.set("mol.client_tool_calls", len(event.calls))
        elif isinstance(event, ev.GenUIChecked):
            span.add_event("mol.genui", {"mol.genui.attempt": event.attempt,
                                         "mol.genui.valid": event.valid,
                                         "mol.genui.final": event.final})
        elif isinstance(event, ev.HookDecided):
            _hook(span, event)
        elif isinstance(event, ev.Failed):
            _failed(span, event)

    def ending(self, span: Sink, facts: dict[str, Any]) -> None:
        turn = facts["turn"]
        result = turn.result
        span.set("mol.turn.status", result.status)
        if result.adapter:
            span.set("mol.adapter", result.adapter)
        _usage(span, turn.usage)
        for purpose, count in sorted(turn.usage.calls.items()):
            span.set(f"mol.model_calls.{purpose}", count)


class Chat(Shape):
    """``chat``: one engine request of a hop (route, answer step, summary, compaction)."""

    span_kind = "client"

    def name(self, facts: dict[str, Any]) -> str:
        return f"{sc.CHAT} {facts['engine_name']}"

    def opened(self, span: Sink, facts: dict[str, Any]) -> None:
        span.set(sc.OPERATION, sc.CHAT)
        span.set(sc.REQUEST_MODEL, facts["engine_name"])
        span.set("mol.adapter", facts["adapter"])
        for key, value in facts["engine"].items():
            span.set(key, value)
        params = facts.get("params") or {}
        for key, name in (("max_tokens", sc.REQUEST_MAX_TOKENS),
                          ("temperature", sc.REQUEST_TEMPERATURE), ("top_p", sc.REQUEST_TOP_P)):
            if isinstance(params.get(key), int | float):
                span.set(name, params[key])
        stop = params.get("stop")
        if stop:
            span.set(sc.REQUEST_STOP_SEQUENCES, [stop] if isinstance(stop, str) else list(stop))
        span.set(sc.REQUEST_STREAM, bool(facts.get("stream")))
        if facts.get("choices"):
            span.set("mol.route.labels", list(facts["choices"]))
        if span.capture:
            span.set(sc.INPUT_MESSAGES, content.input_messages(facts["messages"]))
            if facts.get("tools"):
                span.set(sc.TOOL_DEFINITIONS, content.tool_definitions(facts["tools"]))

    def note(self, span: Sink, facts: dict[str, Any]) -> None:
        if "purpose" in facts:
            span.set("mol.hop", facts["purpose"])
        completion = facts.get("completion")
        if completion is None:
            return
        span.set(sc.RESPONSE_MODEL, facts["engine_name"])
        span.set(sc.RESPONSE_FINISH_REASONS, [completion.finish_reason or "stop"])
        _usage(span, completion.usage)
        if completion.tool_calls:
            span.set("mol.tool_calls", len(completion.tool_calls))
        if span.capture:
            span.set(sc.OUTPUT_MESSAGES, content.output_message(
                completion.content, completion.tool_calls, completion.finish_reason,
                completion.reasoning))


def tool_kind(source: str) -> str:
    """``mcp``, ``sandbox`` or ``plugin``: where a tool's source says it runs."""
    if source.startswith("mcp:"):
        return "mcp"
    return "sandbox" if source == SANDBOX_PLUGIN else "plugin"


class Tool(Shape):
    """``execute_tool``: one tool call, through policy, hooks, approval and the tool."""

    def name(self, facts: dict[str, Any]) -> str:
        return f"{sc.EXECUTE_TOOL} {facts['tool']}"

    def opened(self, span: Sink, facts: dict[str, Any]) -> None:
        span.set(sc.OPERATION, sc.EXECUTE_TOOL)
        span.set(sc.TOOL_NAME, facts["tool"])
        span.set(sc.TOOL_CALL_ID, facts["call_id"])
        span.set(sc.TOOL_TYPE, sc.EXTENSION)
        span.set("mol.adapter", facts["adapter"])
        source = facts.get("source") or ""
        if source:
            span.set("mol.tool.source", source)
            span.set("mol.tool.kind", tool_kind(source))
            if source.startswith("mcp:"):
                span.set("mol.mcp.server", source.removeprefix("mcp:"))
        if facts.get("description"):
            span.set(sc.TOOL_DESCRIPTION, facts["description"])

    def event(self, span: Sink, event: ev.Event) -> None:
        if isinstance(event, ev.ToolCalled):
            if span.capture:
                span.set(sc.TOOL_CALL_ARGUMENTS, event.arguments)
        elif isinstance(event, ev.ToolReturned):
            span.set("mol.tool.is_error", event.is_error)
            if event.is_error:
                span.fail("tool_error")
            if span.capture:
                span.set(sc.TOOL_CALL_RESULT, event.content)
        elif isinstance(event, ev.HookDecided):
            _hook(span, event)
        elif isinstance(event, ev.ToolProgress):
            attributes: dict[str, Any] = {"mol.progress": event.progress}
            if event.total is not None:
                attributes["mol.progress.total"] = event.total
            span.add_event("mol.progress", attributes)
        elif isinstance(event, ev.Elicited):
            attributes = {"mol.mcp.server": event.server, "mol.elicitation.mode": event.mode,
                          "mol.elicitation.action": event.action}
            if span.capture:
                attributes["mol.elicitation.message"] = event.message
            span.add_event("mol.elicitation", attributes)
        elif isinstance(event, ev.Failed):
            _failed(span, event)


class Approval(Shape):
    """A person's (or the conversation's remembered) answer to an ``ask`` tool's call."""

    def name(self, facts: dict[str, Any]) -> str:
        return f"mol.approval {facts['tool']}"

    def opened(self, span: Sink, facts: dict[str, Any]) -> None:
        span.set(sc.TOOL_NAME, facts["tool"])
        span.set(sc.TOOL_CALL_ID, facts["call_id"])

    def event(self, span: Sink, event: ev.Event) -> None:
        if isinstance(event, ev.Approved):
            span.set("mol.approval.allow", event.allow)
            span.set("mol.approval.always", event.always)
            span.set("mol.approval.remembered", event.remembered)
            if span.capture and event.reason:
                span.set("mol.approval.reason", event.reason)


class Compaction(Shape):
    """An adapter's view compacted: its summary written, the engine's view replaced."""

    def name(self, facts: dict[str, Any]) -> str:
        return f"mol.compaction {facts['adapter']}"

    def opened(self, span: Sink, facts: dict[str, Any]) -> None:
        span.set("mol.adapter", facts["adapter"])
        span.set("mol.compaction.trigger", facts["trigger"])

    def event(self, span: Sink, event: ev.Event) -> None:
        if isinstance(event, ev.Compacted):
            span.set("mol.compaction.writer", event.writer)
            span.set("mol.compaction.tokens_before", event.tokens_before)
            span.set("mol.compaction.tokens_after", event.tokens_after)
            span.set("mol.compaction.kept", event.kept)
            span.set("mol.compaction.id", event.compaction)
        elif isinstance(event, ev.Failed):
            _failed(span, event)


class Sandbox(Shape):
    """A command in the sandbox's persistent shell."""

    def name(self, facts: dict[str, Any]) -> str:
        return f"mol.sandbox {facts['op']}"

    def opened(self, span: Sink, facts: dict[str, Any]) -> None:
        span.set("mol.sandbox.op", facts["op"])
        if facts.get("sandbox"):
            span.set("mol.sandbox.id", facts["sandbox"])
        if facts.get("timeout") is not None:
            span.set("mol.sandbox.timeout", float(facts["timeout"]))
        if span.capture and facts.get("command"):
            span.set("mol.sandbox.command", facts["command"])

    def note(self, span: Sink, facts: dict[str, Any]) -> None:
        result = facts.get("result")
        if result is None:
            return
        span.set("mol.sandbox.exit_code", result.exit_code)
        span.set("mol.sandbox.timed_out", result.timed_out)
        span.set("mol.sandbox.output_bytes", len(result.output.encode()))
        if result.fresh_shell or result.fresh_sandbox:
            span.set("mol.sandbox.fresh", "sandbox" if result.fresh_sandbox else "shell")
        if result.timed_out:
            span.fail("timeout")


class MCPCall(Shape):
    """``tools/call`` of an MCP server: the request under the tool call."""

    span_kind = "client"

    def name(self, facts: dict[str, Any]) -> str:
        return f"{sc.MCP_TOOLS_CALL} {facts['tool']}"

    def opened(self, span: Sink, facts: dict[str, Any]) -> None:
        span.set(sc.MCP_METHOD, sc.MCP_TOOLS_CALL)
        span.set(sc.OPERATION, sc.EXECUTE_TOOL)
        span.set(sc.TOOL_NAME, facts["tool"])
        span.set("mol.mcp.server", facts["server"])
        if facts.get("protocol"):
            span.set(sc.MCP_PROTOCOL_VERSION, facts["protocol"])
        span.set(sc.NETWORK_TRANSPORT, sc.PIPE if facts.get("transport") == "stdio" else sc.TCP)

    def note(self, span: Sink, facts: dict[str, Any]) -> None:
        if facts.get("is_error"):
            span.set("mol.tool.is_error", True)
            span.fail("tool_error")

    def event(self, span: Sink, event: ev.Event) -> None:
        if isinstance(event, ev.ToolProgress):
            span.add_event("mol.progress", {"mol.progress": event.progress})


SHAPES: dict[str, Shape] = {"turn": Turn(), "chat": Chat(), "tool": Tool(),
                            "approval": Approval(), "compaction": Compaction(),
                            "sandbox": Sandbox(), "mcp": MCPCall()}
"""The shapes by kind; ``mol.runtime.tracing.outer`` adds the server's and eval's."""
