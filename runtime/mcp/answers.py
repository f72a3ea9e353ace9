"""What mol answers when an MCP server asks its client: sampling, elicitation, roots, logs.

Both protocol eras reach these: handshake-era servers send the requests on
their own (``sampling/createMessage``, ``elicitation/create``, ``roots/list``),
2026-07-28 servers embed them in an ``input_required`` result that the SDK
answers and retries. ``sdk`` turns the SDK's objects into the plain JSON dicts
these take and back.

- **Sampling** runs through the engine boundary as the adapter the HCP names
  (``[mcp_servers.X] sampling``), its tokens capped, its usage emitted as a
  ``model_call`` event of purpose ``sampling`` of the tool call that caused it
  (so the turn's usage and token budget count it). Without ``sampling`` mol
  does not offer the capability; with ``allow = false`` it refuses, saying so.
- **Elicitation** goes to the person: the call's ``ToolContext.elicit`` (``mol
  chat`` asks at the terminal; ``mol serve`` passes it to an API client that
  declared the ``mcp_elicitation`` tool), else it is declined, as it is under
  ``elicitation = "decline"``. A handshake-era request arrives off the call's
  task: it goes to the most recent call in flight, and is declined when calls of
  several sessions are in flight (it could be any of theirs). Accepted form
  answers get the schema's defaults for fields the person left out.
- **Roots** are the configured folders plus the sandbox workspace once the
  session has a sandbox (``list_changed`` is sent when that changes).
- **Logs** of the server land on the ``mol.mcp.server.<name>`` logger.

Nothing here imports ``mcp``.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from mol.core import events as ev
from mol.core.deadlines import paused

logger = logging.getLogger("mol.mcp")

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "notice": logging.INFO,
           "warning": logging.WARNING, "error": logging.ERROR, "critical": logging.CRITICAL,
           "alert": logging.CRITICAL, "emergency": logging.CRITICAL}
_current: contextvars.ContextVar[Any] = contextvars.ContextVar("mol_mcp_call", default=None)


class Refusal(Exception):
    """The client will not answer a server request (the message says why)."""


class Answers:
    """The answers of one configured server's client (``manager`` supplies the engine)."""

    def __init__(self, name: str, config: Any, base_dir: Path, manager: Any) -> None:
        self.name = name
        self.config = config
        self.base_dir = base_dir
        self.manager = manager
        self.workspace: str | None = None
        """The sandbox workspace offered as a root, once the session has a sandbox."""
        self._calls: list[Any] = []

    @property
    def samples(self) -> bool:
        """Whether the sampling capability is offered."""
        return self.config.sampling is not None

    @contextmanager
    def calling(self, context: Any) -> Iterator[None]:
        """Attribute server requests made during a tool call to that call's ``context``."""
        call = _Call(context)
        token = _current.set(call)
        self._calls.append(call)
        try:
            yield
        finally:
            self._calls.remove(call)
            _current.reset(token)
            for scope in call.asks:  # nobody waits for a person on behalf of an ended call
                scope.cancel()

    @staticmethod
    def timed(deadline: Any) -> None:
        """The deadline (a cancel scope) of the current call's request: it stops while a
        person answers the server (``Connection.request``)."""
        call = _current.get()
        if call is not None:
            call.deadline = deadline

    def _call(self) -> _Call | None:
        # Handshake-era requests arrive on the connection's reader task, not the call's:
        # they belong to the most recent call in flight.
        return _current.get() or (self._calls[-1] if self._calls else None)

    async def sample(self, params: dict[str, Any]) -> dict[str, Any]:
        """A ``CreateMessageResult`` for ``sampling/createMessage`` params; ``Refusal``."""
        config = self.config.sampling
        if config is None or not config.allow:
            raise Refusal(f"mol does not allow MCP server {self.name!r} to sample "
                          f"([mcp_servers.{self.name}] sampling)")
        engine = self.manager.sampling_engine()
        messages = sampling_messages(params)
        options: dict[str, Any] = {"max_tokens": min(int(params.get("maxTokens") or config.max_tokens),
                                                     config.max_tokens)}
        if params.get("temperature") is not None:
            options["temperature"] = params["temperature"]
        if params.get("stopSequences"):
            options["stop"] = list(params["stopSequences"])
        started = time.monotonic()
        completion = await engine.complete(config.adapter, messages, params=options)
        emit = getattr(getattr(self._call(), "context", None), "emit", None)
        if emit is not None:
            await emit(ev.ModelCalled(config.adapter, "sampling", completion.usage.to_dict(),
                                      round(time.monotonic() - started, 6)))
        logger.info("MCP server %r sampled %s (%d+%d tokens)", self.name, config.adapter,
                    completion.usage.prompt_tokens, completion.usage.completion_tokens)
        return {"role": "assistant", "content": {"type": "text", "text": completion.content},
                "model": config.adapter,
                "stopReason": "maxTokens" if completion.finish_reason == "length" else "endTurn"}

    async def elicit(self, params: dict[str, Any]) -> dict[str, Any]:
        """An ``ElicitResult`` for ``elicitation/create`` params (form or URL mode)."""
        call = self._call()
        ask = getattr(getattr(call, "context", None), "elicit", None)
        # A request off the call's task, with calls of several sessions in flight, may be
        # any of theirs: asking the most recent one's person could show it to someone else.
        ambiguous = (_current.get() is None and
                     len({getattr(c.context, "session_id", None) for c in self._calls}) > 1)
        ask = None if ambiguous else ask or self.manager.elicit
        if self.config.elicitation == "decline" or ask is None:
            logger.info("MCP server %r asked for input; declined (%s)", self.name,
                        "by policy" if self.config.elicitation == "decline" else
                        "calls of several sessions are in flight" if ambiguous else
                        "nobody to ask")
            return {"action": "decline"}
        answer = {"action": "cancel"}  # the call ended before the person answered
        with _waiting(call):
            answer = dict(await ask(self.name, params))
        context = getattr(call, "context", None)
        if getattr(context, "emit", None) is not None:
            await context.emit(ev.Elicited(context.adapter, context.call_id, self.name,
                                           params.get("mode") or "form",
                                           str(params.get("message", "")),
                                           str(answer.get("action"))))
        if answer.get("action") == "accept" and params.get("mode", "form") == "form":
            answer["content"] = with_defaults(params.get("requestedSchema") or {},
                                              answer.get("content") or {})
        elif answer.get("action") != "accept":
            answer.pop("content", None)
        return answer

    def roots(self) -> list[dict[str, Any]]:
        """The ``roots/list`` answer: configured folders, then the sandbox workspace."""
        roots = [{"uri": (self.base_dir / path).resolve().as_uri(), "name": path}
                 for path in self.config.roots]
        if self.workspace:
            roots.append({"uri": Path(self.workspace).as_uri(), "name": "sandbox workspace"})
        return roots

    def log(self, params: dict[str, Any]) -> None:
        """A ``notifications/message`` from the server, into mol's log."""
        level = _LEVELS.get(str(params.get("level")), logging.INFO)
        source = f" [{params['logger']}]" if params.get("logger") else ""
        logging.getLogger(f"mol.mcp.server.{self.name}").log(
            level, "%s%s %s", self.name, source, params.get("data"))


@dataclass(eq=False)
class _Call:
    """A tool call in flight, as the server's requests during it see it."""

    context: Any
    """The call's ``ToolContext`` (None for a call made without one)."""
    deadline: Any = None
    """The cancel scope bounding the call's request (``tool_timeout_sec``)."""
    asks: set[Any] = field(default_factory=set)
    """Cancel scopes of the waits for a person's answer made on the call's behalf."""


@contextmanager
def _waiting(call: _Call | None) -> Iterator[None]:
    """While a person answers: the call's deadline stops (a person takes the time they
    take; a client's answer has a bound of its own), and the call's end ends the wait."""
    scope = anyio.CancelScope()
    if call is not None:
        call.asks.add(scope)
    try:
        with paused(call.deadline if call is not None else None), scope:
            yield
    finally:
        if call is not None:
            call.asks.discard(scope)


def sampling_messages(params: dict[str, Any]) -> list[dict[str, Any]]:
    """The chat messages of a sampling request (system prompt first; non-text described)."""
    messages: list[dict[str, Any]] = []
    if params.get("systemPrompt"):
        messages.append({"role": "system", "content": params["systemPrompt"]})
    for message in params.get("messages") or []:
        blocks = message.get("content")
        blocks = blocks if isinstance(blocks, list) else [blocks]
        text = "\n".join(b.get("text", "") if b.get("type") == "text"
                         else f"[{b.get('type')}: {b.get('mimeType', '')}]"
                         for b in blocks if isinstance(b, dict))
        messages.append({"role": "assistant" if message.get("role") == "assistant" else "user",
                         "content": text})
    return messages


def with_defaults(schema: dict[str, Any], content: dict[str, Any]) -> dict[str, Any]:
    """``content`` with the schema's ``default`` for every property left out (SEP-1034)."""
    filled = dict(content)
    for name, prop in (schema.get("properties") or {}).items():
        if name not in filled and isinstance(prop, dict) and "default" in prop:
            filled[name] = prop["default"]
    return filled


