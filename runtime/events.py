"""Typed events for everything that happens in a turn.

The CLI prints them (``mol run --json``), the server streams them, the session
store records them. Every event serializes to one JSON object with a ``type``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Event:
    """Base of all events."""

    type: str = field(init=False, default="event")

    def to_dict(self) -> dict[str, Any]:
        """The event as a JSON-able dict with its ``type`` first."""
        data = asdict(self)
        return {"type": self.type, **{k: v for k, v in data.items() if k != "type"}}


def _kind(name: str) -> Any:
    return field(init=False, default=name)


@dataclass(frozen=True)
class RouteDecided(Event):
    """L0 chose the adapter for a turn (or the fallback was used)."""

    adapter: str
    raw: str
    """What the router answered."""
    fallback: bool = False
    reason: str = ""
    """Why the fallback was used (empty when the label was valid)."""
    type: str = _kind("route")


@dataclass(frozen=True)
class ModelCalled(Event):
    """One engine request finished."""

    adapter: str
    purpose: str
    """``route``, ``answer`` or ``summary``."""
    usage: dict[str, Any]
    duration: float
    type: str = _kind("model_call")


@dataclass(frozen=True)
class TextDelta(Event):
    """A piece of the answer as the adapter produces it (streaming only)."""

    adapter: str
    text: str
    type: str = _kind("text_delta")


@dataclass(frozen=True)
class ToolCallDelta(Event):
    """A fragment of a call to a client-provided tool as the adapter produces it (streaming
    only). ``call_id`` and ``name`` come with the first fragment of each call."""

    adapter: str
    index: int
    """Position among this reply's client tool calls."""
    call_id: str | None
    name: str | None
    arguments: str
    type: str = _kind("tool_call_delta")


@dataclass(frozen=True)
class ToolCalled(Event):
    """The adapter asked for a tool."""

    adapter: str
    call_id: str
    name: str
    arguments: str
    type: str = _kind("tool_call")


@dataclass(frozen=True)
class ToolReturned(Event):
    """A tool's result went back to the adapter that called it."""

    adapter: str
    call_id: str
    name: str
    content: str
    is_error: bool
    type: str = _kind("tool_result")


@dataclass(frozen=True)
class HookDecided(Event):
    """A hook allowed, blocked or rewrote a tool call."""

    hook: str
    tool: str
    decision: str
    """``allow``, ``block`` or ``rewrite``."""
    reason: str = ""
    call_id: str = ""
    """The mol-issued id of the tool call the hook decided on."""
    type: str = _kind("hook")


@dataclass(frozen=True)
class ClientToolsRequested(Event):
    """The adapter called tools the client provides; the turn waits for their results."""

    adapter: str
    calls: list[dict[str, Any]]
    type: str = _kind("client_tool_calls")


@dataclass(frozen=True)
class Summarized(Event):
    """The summary hop finished (kept runtime-side, never sent to the client)."""

    adapter: str
    ok: bool
    text: str
    type: str = _kind("summary")


@dataclass(frozen=True)
class Answered(Event):
    """The turn's final answer."""

    adapter: str
    text: str
    stopped: str = ""
    """Why the loop stopped early (``max_steps``, ``token_budget``), else empty."""
    type: str = _kind("answer")


@dataclass(frozen=True)
class Failed(Event):
    """Something went wrong (the turn may still complete)."""

    where: str
    message: str
    type: str = _kind("error")


def add_usage(total: dict[str, int], usage: dict[str, Any]) -> None:
    """Add a ``ModelCalled`` event's prompt and completion tokens to ``total``."""
    for key in ("prompt_tokens", "completion_tokens"):
        total[key] = total.get(key, 0) + (usage.get(key) or 0)


OnEvent = Callable[[Event], Awaitable[None] | None]
