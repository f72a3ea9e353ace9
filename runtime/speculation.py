"""Overlapped routing (``[router] speculate = "sticky"``): the answer hop on the conversation's
last adapter starts at the same time as the route hop.

Conversations stay on one adapter for runs of turns, so the last adapter is usually the
one the router picks; waiting for the route before asking it costs every turn the route
hop's round trip before its first token. With ``sticky`` the session asks the last
adapter at once, with the request its answer hop would make (``Speculation``), and holds
back everything the engine streams. When the route agrees, the answer hop's first request
is that one (``Adopting``): the held deltas go out, the rest as it comes, so the first
token comes as if there were no route hop. When it disagrees, the request is cancelled (the
stream closed, so the engine aborts it) and nothing of it reaches the client, the view, the
session, a trajectory or a hook: only the request left the process.

Only the engine request is speculative: tool calls, hooks, compaction and the view's
commits happen in the answer hop itself, after the route. The held request is used only
when the answer hop's own first request is the same request (the same messages, tools and
parameters: a ``SubagentStart`` hook's context or a compaction makes it another, and it is
then cancelled as well). A ``speculation`` event says whether it held.

Engines whose requests may be abandoned without a trace say so (``speculates``, as
``LiteLLMEngine`` does); an eval episode's recording or replay engine does not, so its
trajectories never see a speculative request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio

from mol.core import events as ev
from mol.runtime.engine import Completion, Delta, Engine, OnDelta

Emit = Callable[[ev.Event], Awaitable[None]]


class Speculation:
    """One answer request started before its route is known, its deltas held back."""

    def __init__(self, engine: Engine, adapter: str, messages: list[dict[str, Any]],
                 tools: list[dict[str, Any]] | None, params: dict[str, Any], stream: bool,
                 emit: Emit) -> None:
        self.engine, self.adapter, self.emit = engine, adapter, emit
        self.request = (messages, tools, params)
        self.stream = stream
        self.decided = False
        """Whether its ``speculation`` event went out (it held, or it was cancelled)."""
        self._held: list[Delta] = []
        self._sink: OnDelta | None = None
        self._done = anyio.Event()
        self._scope = anyio.CancelScope()
        self._completion: Completion | None = None
        self._error: Exception | None = None

    async def run(self) -> None:
        """Make the request (a task of the turn's, until it ends or is cancelled)."""
        messages, tools, params = self.request
        with self._scope:
            try:
                self._completion = await self.engine.complete(
                    self.adapter, messages, tools=tools, params=params,
                    on_delta=self._delta if self.stream else None)
            except Exception as exc:  # the answer hop meets it again if it takes the request
                self._error = exc
        self._done.set()

    async def _delta(self, delta: Delta) -> None:
        if self._sink is None:
            self._held.append(delta)
        else:
            await self._sink(delta)

    def same(self, adapter: str, messages: list[dict[str, Any]],
             tools: list[dict[str, Any]] | None, params: dict[str, Any] | None,
             on_delta: OnDelta | None) -> bool:
        """Whether a request of the answer hop is the one started ahead."""
        return (adapter, messages, tools, params or {}) == (self.adapter, *self.request) and (
            on_delta is not None) == self.stream

    async def take(self, on_delta: OnDelta | None) -> Completion:
        """The request's completion, as the answer hop's own: the held deltas first, then
        the rest as they come; its failure, if it failed."""
        await self._decide(True, "")
        if on_delta is not None:
            while self._held:  # more may arrive while one is handed on: they queue behind
                await on_delta(self._held.pop(0))
            self._sink = on_delta
        await self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._completion is not None
        return self._completion

    async def decline(self, reason: str) -> None:
        """Cancel the request (nothing of it goes anywhere) and say why."""
        self.cancel()
        await self._decide(False, reason)

    def cancel(self) -> None:
        """Stop the request if it still runs (its stream closed: the engine aborts it)."""
        self._scope.cancel()

    async def _decide(self, held: bool, reason: str) -> None:
        if not self.decided:
            self.decided = True
            await self.emit(ev.Speculated(self.adapter, held, reason))


class Adopting:
    """The answer hop's engine when the route agreed with a speculation: its first request
    is served by the speculation when it is the same request; every other request (and a
    first one that differs, after cancelling the speculation) goes to ``engine``."""

    def __init__(self, engine: Engine, speculation: Speculation) -> None:
        self.engine, self.speculation = engine, speculation
        self._first = True

    async def complete(self, adapter: str, messages: list[dict[str, Any]], *,
                       tools: list[dict[str, Any]] | None = None,
                       params: dict[str, Any] | None = None,
                       choices: list[str] | None = None, on_delta: OnDelta | None = None,
                       extra: dict[str, Any] | None = None) -> Completion:
        """The speculation's completion for the same first request, else the engine's."""
        first, self._first = self._first, False
        if first and not choices and not extra:
            if self.speculation.same(adapter, messages, tools, params, on_delta):
                return await self.speculation.take(on_delta)
        if first:
            await self.speculation.decline("the answer hop's first request differed from "
                                           "the one started ahead")
        return await self.engine.complete(adapter, messages, tools=tools, params=params,
                                          choices=choices, on_delta=on_delta, extra=extra)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)


@asynccontextmanager
async def running(speculation: Speculation | None) -> AsyncIterator[None]:
    """Run ``speculation`` (if any) while the body runs, and cancel it at the end whatever
    happened; the body's exception comes out as it was raised."""
    if speculation is None:
        yield
        return
    error: Exception | None = None
    async with anyio.create_task_group() as group:
        group.start_soon(speculation.run)
        try:
            yield
        except Exception as exc:  # raised after the group, not wrapped in an ExceptionGroup
            error = exc
        else:
            if not speculation.decided:
                await speculation.decline("the answer hop made no request")
        finally:
            speculation.cancel()
    if error is not None:
        raise error
