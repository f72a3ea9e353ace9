"""What the two APIs' replies share: reading a turn's typed events, and the route tail.

A ``Reply`` reads the events of one ``Job`` (``mol.server.turns.runner``)
and hands its subclass (a chat completion, a Responses object) exactly what it
renders: ``ReasoningDelta``, ``TextDelta`` and ``ToolCallDelta`` while
streaming, then one outcome: ``Answered``, ``ClientToolsRequested`` or an
``ApiError`` (an API without approval items of its own gets the approvals a turn
waits for as calls of the client's ``mol_approval`` tool,
``mol.server.turns.approvals``). On the way it keeps what both APIs report: the usage
(with the engine's cached prompt tokens) and which adapter answered and how it was
chosen (``RouteDecided``), which reach the client as the ``x-mol-adapter`` and
``x-mol-route`` headers and the body's ``metadata``. ``respond`` is the tail
both routes share: wait for the first item, answer an error at once, else a
JSON body or a stream. While a streamed turn works without anything to send
(tools running), an SSE comment goes out every ``keepalive`` seconds, so proxies
and clients do not take the quiet connection for a dead one; a stream still
waiting for its first item after that long starts with them.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Any

from starlette.responses import JSONResponse, Response, StreamingResponse

from mol.core import events as ev
from mol.core.errors import TurnCancelled
from mol.runtime import TurnResult
from mol.server.api.messages import fingerprint
from mol.server.http.errors import ApiError, api_error
from mol.server.turns.approvals import as_calls
from mol.server.turns.jobs import Job, KeepAlive

log = logging.getLogger("mol.server")

Outcome = ev.Answered | ev.ClientToolsRequested | ApiError | TurnCancelled
"""How a turn ends, as a reply sees it (a failure already in the client's words, but a
cancellation, which a Responses reply renders as a response)."""
Delta = ev.ReasoningDelta | ev.TextDelta | ev.ToolCallDelta
Compaction = ev.Compacting | ev.Compacted
"""A view compacted during the turn (a Responses reply shows it)."""
Item = Delta | Compaction | Outcome | KeepAlive



class Reply:
    """Reads one job's events; subclasses render them in their API's shape."""

    id_prefix = "reply-"
    noun = "reply"
    """What the API calls what it streams (in the log line of a client gone mid-stream)."""
    renders_cancelled = False
    """A cancelled turn is an outcome this API renders (a Responses object), not an error."""
    shows_compaction = False
    """Compactions during the turn are items this API shows (the Responses ``compaction``
    item), passed on as they happen."""
    renders_approvals = False
    """Approval requests are items this API shows (the Responses ``mcp_approval_request``);
    else they reach the client as ``mol_approval`` calls."""

    def __init__(self, model: str, job: Job) -> None:
        self.model, self.job = model, job
        self.id = self.id_prefix + secrets.token_hex(12)
        self.created = int(time.time())
        self.usage = ev.TurnUsage()
        """What the turn used up to its outcome (as its job says, once it is known)."""
        self.genui: ev.GenUIChecked | None = None
        """The turn's last generated-UI check (``mol.server.api.genui`` renders it)."""
        self.adapter = ""
        """The adapter answering the turn (the last ``RouteDecided``)."""
        self.route = ""
        """How it was chosen: ``routed``, ``fallback`` or ``pinned``."""
        self.keepalive: float | None = None
        """Seconds of quiet after which a stream sends a keep-alive comment."""
        self.finished = False
        """The reply reached its end (a stream cut short by the client has not)."""
        self.compactions = 0
        """Views compacted during the turn so far."""

    def headers(self) -> dict[str, str]:
        """``x-mol-adapter`` and ``x-mol-route``, once the route is known."""
        if not self.adapter:
            return {}
        return {"x-mol-adapter": self.adapter, "x-mol-route": self.route}

    def metadata(self) -> dict[str, str]:
        """The same as the headers, for the body's ``metadata``."""
        return {"mol_adapter": self.adapter, "mol_route": self.route} if self.adapter else {}

    async def items(self) -> AsyncIterator[Item]:
        """Deltas and keep-alives (streaming only), then exactly one outcome."""
        stream = self.job.request.stream
        async for item in self.job.outcomes(self.keepalive if stream else None):
            if isinstance(item, KeepAlive):
                yield item
            elif isinstance(item, Exception):  # what the turn raised, in the client's words
                cancelled = isinstance(item, TurnCancelled) and self.renders_cancelled
                yield item if cancelled else api_error(item, self.job.request.where)
                return
            if isinstance(item, TurnResult):  # the turn ended without its outcome event
                self.usage = self.job.usage or item.tally
                yield (self._asking(ev.ClientToolsRequested(
                    item.adapter, item.client_calls, item.reasoning, item.asked))
                       if item.status == "waiting" else
                       ev.Answered(item.adapter, item.answer, item.stopped, item.reasoning))
                return
            if isinstance(item, ev.GenUIChecked):
                self.genui = item
            elif isinstance(item, ev.RouteDecided):
                self.adapter, self.route = item.adapter, item.how
            elif isinstance(item, Delta) and stream:
                yield item
            elif isinstance(item, Compaction) and self.shows_compaction:
                self.compactions += isinstance(item, ev.Compacted)
                if stream:
                    yield item
            elif isinstance(item, ev.Answered | ev.ClientToolsRequested):
                self.usage = self.job.usage or self.usage
                yield item if isinstance(item, ev.Answered) else self._asking(item)
                return

    async def events(self, first: Item, rest: AsyncIterator[Item]) -> AsyncIterator[bytes]:
        """The streamed reply (``pieces``, the API's own), ended once: a client that went
        away mid-stream is logged in one line and the job's queue closed; the turn itself
        goes on."""
        try:
            async for piece in self.pieces(first, rest):
                yield piece
            self.finished = True
        finally:
            if not self.finished:
                log.info("the client went away mid-stream (%s %s, adapter %s)", self.noun,
                         self.id, self.adapter or "not chosen yet")
            self.job.receive.close()

    def pieces(self, first: Item, rest: AsyncIterator[Item]) -> AsyncIterator[bytes]:
        """The pieces of the streamed reply, from the first item to the outcome."""
        raise NotImplementedError

    def _asking(self, outcome: ev.ClientToolsRequested) -> ev.ClientToolsRequested:
        """``outcome`` as this API renders it: its approvals as ``mol_approval`` calls after
        the client's own, unless the API has items for them."""
        if self.renders_approvals or not outcome.asked:
            return outcome
        return replace(outcome, calls=[*outcome.calls, *as_calls(outcome.asked)], asked=[])


class TranscriptReply(Reply):
    """A reply to a client that resends its whole transcript (Chat Completions, the Anthropic
    Messages API): it names the point where it ends by the fingerprint (of ``kind``) of the
    transcript the client then holds: the messages it sent plus the reply as sent."""

    kind = "chat"

    def __init__(self, model: str, messages: list[dict[str, Any]], job: Job) -> None:
        super().__init__(model, job)
        self.messages = messages
        """The request's messages in mol's plain form, as the client sent them."""

    async def finish(self, message: dict[str, Any]) -> None:
        """Name the point this reply ends at by the transcript the client now holds;
        ``message`` is the reply, chat-shaped (without reasoning: clients do not send it
        back)."""
        transcript = [*self.messages, {k: v for k, v in message.items() if v is not None}]
        if transcript[-1].get("content") is None:
            transcript[-1]["content"] = ""
        await self.job.ends_at(fingerprint(transcript, self.kind))


async def respond(reply: Reply, stream: bool,
                  complete: Callable[[Outcome], Awaitable[dict[str, Any]]],
                  streamed: Callable[[Item, AsyncIterator[Item]], AsyncIterator[bytes]],
                  keepalive: float | None = None, scope: dict[str, Any] | None = None
                  ) -> Response:
    """The reply to a started turn: an error at once (in the shape the request at ``scope``
    speaks), else the JSON body or the stream.

    ``complete(outcome)`` builds the non-streaming body (it renders a cancelled turn);
    ``streamed(first, rest)`` yields the server-sent events from the first item on.
    """
    reply.keepalive = keepalive
    items = reply.items()
    first = await anext(items)
    if isinstance(first, ApiError):
        await items.aclose()
        return first.response(scope)
    if not stream:
        try:
            # Without streaming no deltas are passed on: the first item is the outcome.
            assert not isinstance(first, Delta | KeepAlive)
            return _Delivered(reply.job, JSONResponse(await complete(first),
                                                      headers=reply.headers()))
        finally:
            await items.aclose()
    return _Delivered(reply.job, StreamingResponse(
        streamed(first, items), media_type="text/event-stream", headers=reply.headers()))


class _Delivered(Response):
    """A reply that sets its job's ``delivered`` once it was sent (or could not be)."""

    def __init__(self, job: Job, response: Response) -> None:
        self.job, self.response = job, response
        self.status_code, self.raw_headers = response.status_code, response.raw_headers
        self.background = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await self.response(scope, receive, send)
        finally:
            self.job.delivered.set()
