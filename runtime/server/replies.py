"""What the two APIs' replies share: reading a turn's typed events, and the route tail.

A ``Reply`` reads the events of one ``Job`` (``mol.runtime.server.runner``)
and hands its subclass (a chat completion, a Responses object) exactly what it
renders: ``ReasoningDelta``, ``TextDelta`` and ``ToolCallDelta`` while
streaming, then one outcome: ``Answered``, ``ClientToolsRequested`` or an
``ApiError``. On the way it keeps what both APIs report: the usage (with the
engine's cached prompt tokens) and which adapter answered and how it was
chosen (``RouteDecided``), which reach the client as the ``x-mol-adapter`` and
``x-mol-route`` headers and the body's ``metadata``. ``respond`` is the tail
both routes share: wait for the first item, answer an error at once, else a
JSON body or a stream.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.responses import JSONResponse, Response, StreamingResponse

from mol.runtime import events as ev
from mol.runtime.harness import TurnResult
from mol.runtime.server.http import ApiError
from mol.runtime.server.runner import Job, Runner

Outcome = ev.Answered | ev.ClientToolsRequested | ApiError
"""How a turn ends, as a reply sees it."""
Delta = ev.ReasoningDelta | ev.TextDelta | ev.ToolCallDelta
Item = Delta | Outcome


class Reply:
    """Reads one job's events; subclasses render them in their API's shape."""

    id_prefix = "reply-"

    def __init__(self, model: str, job: Job, runner: Runner) -> None:
        self.model, self.job, self.runner = model, job, runner
        self.id = self.id_prefix + secrets.token_hex(12)
        self.created = int(time.time())
        self.usage: dict[str, int] = {"prompt_tokens": 0, "completion_tokens": 0}
        self.cached_tokens = 0
        """Prompt tokens the engine served from its prefix cache, when it says."""
        self.genui: ev.GenUIChecked | None = None
        """The turn's last generated-UI check (``mol.runtime.server.genui`` renders it)."""
        self.adapter = ""
        """The adapter answering the turn (the last ``RouteDecided``)."""
        self.route = ""
        """How it was chosen: ``routed``, ``fallback`` or ``pinned``."""

    def headers(self) -> dict[str, str]:
        """``x-mol-adapter`` and ``x-mol-route``, once the route is known."""
        if not self.adapter:
            return {}
        return {"x-mol-adapter": self.adapter, "x-mol-route": self.route}

    def metadata(self) -> dict[str, str]:
        """The same as the headers, for the body's ``metadata``."""
        return {"mol_adapter": self.adapter, "mol_route": self.route} if self.adapter else {}

    async def items(self) -> AsyncIterator[Item]:
        """Deltas (streaming only), then exactly one outcome."""
        stream = self.job.request.stream
        async for item in self.job.outcomes():
            if isinstance(item, ApiError):
                yield item
                return
            if isinstance(item, TurnResult):  # the turn ended without its outcome event
                yield (ev.ClientToolsRequested(item.adapter, item.client_calls, item.reasoning)
                       if item.status == "waiting" else
                       ev.Answered(item.adapter, item.answer, item.stopped, item.reasoning))
                return
            if isinstance(item, ev.ModelCalled):
                ev.add_usage(self.usage, item.usage)
                self.cached_tokens += item.usage.get("cached_tokens") or 0
            elif isinstance(item, ev.GenUIChecked):
                self.genui = item
            elif isinstance(item, ev.RouteDecided):
                self.adapter, self.route = item.adapter, item.how
            elif isinstance(item, Delta) and stream:
                yield item
            elif isinstance(item, ev.Answered | ev.ClientToolsRequested):
                yield item
                return


async def respond(reply: Reply, stream: bool,
                  complete: Callable[[Outcome], Awaitable[dict[str, Any]]],
                  streamed: Callable[[Item, AsyncIterator[Item]], AsyncIterator[bytes]]
                  ) -> Response:
    """The reply to a started turn: an error at once, else the JSON body or the stream.

    ``complete(outcome)`` builds the non-streaming body; ``streamed(first, rest)``
    yields the server-sent events from the first item on.
    """
    items = reply.items()
    first = await anext(items)
    if isinstance(first, ApiError):
        await items.aclose()
        return first.response()
    if not stream:
        try:
            # Without streaming no deltas are passed on: the first item is the outcome.
            assert not isinstance(first, Delta)
            return JSONResponse(await complete(first), headers=reply.headers())
        finally:
            await items.aclose()
    return StreamingResponse(streamed(first, items), media_type="text/event-stream",
                             headers=reply.headers())
