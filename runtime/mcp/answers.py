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
  answers get the schema's defaults for fields the answer left out, whoever gave
  it; an asker that fails, or answers what is no answer, answers ``cancel``.
- **Sign-in** (``sign_in``): when the server's OAuth needs a person during a call
  (a step-up to a wider scope), the call's person is sent to the authorization URL
  as a URL-mode request, through the same asker.
- **Roots** are the configured folders plus the sandbox workspace once the
  session has a sandbox (``list_changed`` is sent when that changes).
- **Logs** of the server land on the ``mol.mcp.server.<name>`` logger.

Nothing here imports ``mcp``.
"""

from __future__ import annotations

import contextvars
import logging
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio

from mol.core import events as ev
from mol.core.deadlines import paused
from mol.core.errors import MCPSignInError
from mol.core.schemas import with_defaults
from mol.core.tools import ELICIT_ACTIONS

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
        """An ``ElicitResult`` for ``elicitation/create`` params (form or URL mode): an
        accepted form with the schema's defaults for what the person left out (SEP-1034,
        whoever answered), anything but an accepted form without content."""
        call = self._call()
        ask, why = self._asker(call, _current.get() is None)
        if self.config.elicitation == "decline" or ask is None:
            logger.info("MCP server %r asked for input; declined (%s)", self.name,
                        "by policy" if self.config.elicitation == "decline" else why)
            return {"action": "decline"}
        answer = await self._ask(call, ask, params)
        if answer.get("action") == "accept" and params.get("mode", "form") == "form":
            answer["content"] = with_defaults(params.get("requestedSchema") or {},
                                              answer.get("content") or {})
        else:
            answer.pop("content", None)
        return answer

    def can_sign_in(self) -> bool:
        """Whether someone can sign in now, for a request being made: ``mol mcp login``'s
        browser, or the person of the tool call the request belongs to."""
        return self.manager.sign_in is not None or self._asker(_current.get(), False)[0] is not None

    async def sign_in(self, url: str) -> None:
        """Have a person open the OAuth authorization ``url`` (a first sign-in, or a step-up
        to a wider scope during a call): ``mol mcp login``'s ``sign_in``, else the call's
        person, asked as a URL-mode elicitation; ``MCPSignInError`` when nobody can, or the
        person does not accept."""
        if self.manager.sign_in is not None:
            await self.manager.sign_in(url)
            return
        call = _current.get()
        ask, why = self._asker(call, False)
        scope = parse_qs(urlsplit(url).query).get("scope", [""])[0]
        wanted = f" for the scope {scope!r}" if scope else ""
        if ask is None:
            raise MCPSignInError(f"MCP server {self.name!r} needs a sign-in{wanted} and {why}: "
                                 f"run 'mol mcp login {self.name}'")
        answer = await self._ask(call, ask, {
            "mode": "url", "url": url, "elicitationId": secrets.token_hex(8),
            "message": f"sign in to MCP server {self.name!r}{wanted} (this call needs it): "
                       "open the URL, then say when you are done"})
        if answer.get("action") != "accept":
            raise MCPSignInError(f"MCP server {self.name!r} needs a sign-in{wanted}; the person "
                                 f"answered {answer.get('action')!r}")

    def _asker(self, call: _Call | None, off_task: bool) -> tuple[Any, str]:
        """Who answers for ``call`` (its ``ToolContext.elicit``, else the manager's), or None
        and why not. A request ``off_task`` (a handshake-era request, off the call's task)
        while calls of several sessions are in flight may be any of theirs: asking the most
        recent one's person could show it to someone else."""
        if call is None and not off_task:
            return None, "no tool call is in flight (a person is asked only during one)"
        if off_task and len({getattr(c.context, "session_id", None) for c in self._calls}) > 1:
            return None, "calls of several sessions are in flight"
        ask = getattr(getattr(call, "context", None), "elicit", None) or self.manager.elicit
        return ask, "" if ask is not None else "nobody to ask"

    async def _ask(self, call: _Call | None, ask: Any, params: dict[str, Any]) -> dict[str, Any]:
        """The answer of ``ask`` to ``params``, as a plain dict; ``cancel`` when the call ended
        first or the asker failed (an asker's failure must not end the server's request in an
        internal error). The call's ``elicitation`` event names the action."""
        answer: dict[str, Any] = {"action": "cancel"}  # the call ended before the answer
        with _waiting(call):
            try:
                answer = _plain_answer(await ask(self.name, params))
            except Exception as exc:
                logger.warning("MCP server %r: answering its request for input failed: %s: %s",
                               self.name, type(exc).__name__, exc)
        context = getattr(call, "context", None)
        if getattr(context, "emit", None) is not None:
            await context.emit(ev.Elicited(context.adapter, context.call_id, self.name,
                                           params.get("mode") or "form",
                                           str(params.get("message", "")),
                                           str(answer.get("action"))))
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


def _plain_answer(answer: Any) -> dict[str, Any]:
    """An asker's answer as an ``ElicitResult`` dict: ``cancel`` for one that is not (an
    action outside accept, decline and cancel; content that is not an object)."""
    if not isinstance(answer, dict) or answer.get("action") not in ELICIT_ACTIONS:
        logger.warning("an elicitation answer is not {action, content}: %.200r", answer)
        return {"action": "cancel"}
    content = answer.get("content")
    if content is not None and not isinstance(content, dict):
        logger.warning("an elicitation answer's content is not an object: %.200r", content)
        return {"action": "cancel"}
    return dict(answer)
