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


ROUTED, FALLBACK, PINNED = "routed", "fallback", "pinned"
"""How a turn's adapter was chosen (``RouteDecided.route``, the ``x-mol-route`` header)."""


@dataclass(frozen=True)
class RouteDecided(Event):
    """The router chose the adapter for a turn, the fallback was used, or the turn is pinned.
    A second one in the same turn means the chosen adapter was unavailable."""

    adapter: str
    raw: str
    """What the router answered."""
    fallback: bool = False
    reason: str = ""
    """Why the fallback was used, or why the turn is pinned (empty when the label was valid)."""
    route: str = ""
    """``routed``, ``fallback`` or ``pinned``; empty means ``fallback`` decides."""
    type: str = _kind("route")

    @property
    def how(self) -> str:
        """``routed``, ``fallback`` or ``pinned``."""
        return self.route or (FALLBACK if self.fallback else ROUTED)


@dataclass(frozen=True)
class Speculated(Event):
    """Whether the answer started ahead on the conversation's last adapter, before the route
    was known (``[router] speculate = "sticky"``), became the turn's answer (``held``) or
    was cancelled unseen, and why."""

    adapter: str
    """The adapter asked ahead: the conversation's last one."""
    held: bool
    reason: str = ""
    """Why it did not hold (the route chose another adapter, ...); empty when it held."""
    type: str = _kind("speculation")


@dataclass(frozen=True)
class ModelCalled(Event):
    """One engine request finished."""

    adapter: str
    purpose: str
    """``route``, ``answer``, ``summary``, or ``sampling`` (an MCP server asked for it
    during a tool call)."""
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
class ReasoningDelta(Event):
    """A piece of the engine's reasoning (``reasoning_content``) as it arrives (streaming
    only); it reaches clients, and the adapter's view only with ``keep_reasoning``."""

    adapter: str
    text: str
    type: str = _kind("reasoning_delta")


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
class ToolProgress(Event):
    """A running tool reported how far it got (an MCP server's progress notification)."""

    adapter: str
    call_id: str
    name: str
    progress: float
    total: float | None = None
    message: str = ""
    type: str = _kind("tool_progress")


@dataclass(frozen=True)
class Elicited(Event):
    """An MCP server asked for input during a tool call, and what was answered
    (``accept``, ``decline`` or ``cancel``; the content stays with the server)."""

    adapter: str
    call_id: str
    server: str
    mode: str
    message: str
    action: str
    type: str = _kind("elicitation")


@dataclass(frozen=True)
class Approved(Event):
    """A person answered a call of an ``ask`` tool (or the conversation's remembered answer
    did: ``remembered``)."""

    tool: str
    call_id: str
    allow: bool
    always: bool = False
    remembered: bool = False
    reason: str = ""
    type: str = _kind("approval")


@dataclass(frozen=True)
class HookDecided(Event):
    """A hook allowed, blocked or rewrote a tool call, blocked or added context to a turn, or
    failed where it cannot block."""

    hook: str
    tool: str
    """The tool of a tool event; empty for the events of a turn."""
    decision: str
    """``allow``, ``block``, ``rewrite``, ``context`` or ``ignored``."""
    reason: str = ""
    event: str = "PreToolUse"
    """The hook event: ``PreToolUse``, ``UserPromptSubmit``, ``Stop``..."""
    call_id: str = ""
    """The mol-issued id of the tool call the hook decided on."""
    type: str = _kind("hook")


@dataclass(frozen=True)
class ClientToolsRequested(Event):
    """The adapter called tools the client provides, or ``ask`` tools a person answers after
    the turn; the turn waits for their results and answers."""

    adapter: str
    calls: list[dict[str, Any]]
    reasoning: str = ""
    """The engine's reasoning on the reply that made the calls."""
    asked: list[dict[str, Any]] = field(default_factory=list)
    """Calls waiting for a person's approval: ``{id, name, arguments, source}`` each, the
    arguments as they would run (after the hooks), ``source`` the tool's (``Tool.source``)."""
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
    reasoning: str = ""
    """The engine's reasoning on the answering reply (empty when it gave none)."""
    finish_reason: str = ""
    """The engine's ``finish_reason`` for the answering reply (``length``: its token limit
    cut it); empty when the loop stopped it."""
    stop_sequence: str = ""
    """The client's stop sequence that ended the answer, when the engine says which."""
    type: str = _kind("answer")


@dataclass(frozen=True)
class GenUIChecked(Event):
    """Generated UI in an answer (or a ``render_ui`` call) was checked (``mol.genui``)."""

    adapter: str
    attempt: int
    """0 for the first answer of the turn, then 1, 2, ... for each repair round."""
    valid: bool
    """Whether every UI checked is valid."""
    final: bool
    """Whether the turn reports this verdict: the UI is valid, or no repair round is left."""
    uis: list[dict[str, Any]]
    """Each UI checked (``Checked.to_dict()``: kind, valid, messages or code, problems)."""
    type: str = _kind("genui")


@dataclass(frozen=True)
class Compacting(Event):
    """An adapter's view is being compacted (its summary is being written)."""

    adapter: str
    trigger: str
    """``auto`` (the request would outgrow the window), ``overflow`` (the engine said it
    did) or ``manual`` (asked for)."""
    type: str = _kind("compacting")


@dataclass(frozen=True)
class Compacted(Event):
    """An adapter's view was compacted: the engine sees its system prompt, the summary and the
    ``kept`` most recent messages verbatim."""

    adapter: str
    trigger: str
    writer: str
    """The adapter that wrote the summary."""
    tokens_before: int
    tokens_after: int
    """The view's size before and after, in tokens (estimated)."""
    kept: int
    """Messages of the view kept verbatim after the summary."""
    compaction: str
    """The compaction's id (``Conversation.compactions``)."""
    type: str = _kind("compaction")


@dataclass(frozen=True)
class Failed(Event):
    """Something went wrong (the turn may still complete)."""

    where: str
    message: str
    type: str = _kind("error")


@dataclass
class TurnUsage:
    """What a turn's model calls used, summed once, by the turn's owner, as its
    ``ModelCalled`` events pass (``mol.runtime.turn.Turn``); everyone else reads it."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    """Prompt tokens the engine served from its prefix cache, where it says."""
    calls: dict[str, int] = field(default_factory=dict)
    """Model calls by purpose (``route``, ``answer``, ``summary``, ...)."""

    def add(self, event: ModelCalled) -> None:
        """Count one model call."""
        usage = event.usage
        self.prompt_tokens += usage.get("prompt_tokens") or 0
        self.completion_tokens += usage.get("completion_tokens") or 0
        self.cached_tokens += usage.get("cached_tokens") or 0
        self.calls[event.purpose] = self.calls.get(event.purpose, 0) + 1

    def totals(self) -> dict[str, int]:
        """Prompt and completion tokens, as turn logs store them."""
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}

    def since(self, earlier: TurnUsage) -> TurnUsage:
        """What was used after ``earlier`` (a copy taken then)."""
        return TurnUsage(self.prompt_tokens - earlier.prompt_tokens,
                         self.completion_tokens - earlier.completion_tokens,
                         self.cached_tokens - earlier.cached_tokens,
                         {k: n - earlier.calls.get(k, 0) for k, n in self.calls.items()})

    def copy(self) -> TurnUsage:
        """A copy that does not move on with the turn."""
        return TurnUsage(self.prompt_tokens, self.completion_tokens, self.cached_tokens,
                         dict(self.calls))


Observer = Callable[[Event], Awaitable[None] | None]
"""Who is told of a turn's events, in order, as they happen (a session's ``observers``)."""
