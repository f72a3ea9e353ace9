"""Conversations gone quiet: their deferred summaries, written in the background.

With ``[summary] when = "deferred"`` a turn ends without its summary: the segment of the
adapter's turns stays open until another adapter is about to answer, which then waits for
the summary request. A conversation whose last turn ended ``idle_after`` seconds ago with no
turn since has gone idle: the runner summarizes its open segments then (``Session.settle``),
so that its next switch of adapter does not wait. It holds the conversation as a turn does
(the lock and the store's lease) and reads it from the store, so a turn arriving meanwhile
waits for it and sees the summaries; a turn that started before the timer fired wins, and
the timer starts again when that turn ends. Only stored conversations go idle this way; a
failure leaves the segment open, for the next reader to summarize.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
from anyio.abc import TaskGroup

from mol.core.errors import MolError
from mol.runtime import Conversation, Recorder, Runtime, SessionStore, open_segments
from mol.server.turns.leases import Leases

log = logging.getLogger("mol.server")


class Idle:
    """Timers of the conversations whose last turn left deferred summaries open."""

    def __init__(self, runtime: Runtime, store: SessionStore, leases: Leases,
                 deadline: float, metrics: Any = None) -> None:
        self.runtime, self.store, self.leases = runtime, store, leases
        self.deadline, self.metrics = deadline, metrics
        config = runtime.artifact.doc.summary
        self.after = config.idle_after if config.when == "deferred" else 0.0
        """Seconds of quiet before the summaries are written (0: never)."""
        self._turns: dict[str, int] = {}
        """Conversation -> turns started on it (a timer fires only if none started since)."""
        self._timers: dict[str, anyio.CancelScope] = {}

    def started(self, session_id: str) -> None:
        """A turn of ``session_id`` started: its timer, if any, stops."""
        if not self.after:
            return
        self._turns[session_id] = self._turns.get(session_id, 0) + 1
        timer = self._timers.pop(session_id, None)
        if timer is not None:
            timer.cancel()

    def ended(self, group: TaskGroup, conversation: Conversation, stored: bool) -> None:
        """A turn of ``conversation`` ended: time its quiet when it left summaries open."""
        session_id = conversation.id
        if not self.after or not stored or not open_segments(conversation):
            if session_id not in self._timers:
                self._turns.pop(session_id, None)
            return
        scope = anyio.CancelScope()
        self._timers[session_id] = scope
        group.start_soon(self._later, session_id, self._turns.get(session_id, 0), scope)

    async def _later(self, session_id: str, turns: int, scope: anyio.CancelScope) -> None:
        with scope:
            await anyio.sleep(self.after)
            if self._timers.get(session_id) is scope:
                del self._timers[session_id]
            await self._settle(session_id, turns)

    async def _settle(self, session_id: str, turns: int) -> None:
        try:
            with anyio.fail_after(self.deadline):
                await self.leases.take(session_id)
                try:
                    if self._turns.get(session_id, 0) != turns:
                        return  # a turn came meanwhile: it restarts the timer when it ends
                    conversation = await self.store.load(session_id)
                    recorder = Recorder(self.store, self.runtime.artifact.digest)
                    observers = [] if self.metrics is None else [self.metrics.turn()]
                    async with self.runtime.session(conversation, checkpoint=recorder.checkpoint,
                                                    started=True,
                                                    observers=observers) as session:
                        done = await session.settle()
                    log.info("session %s: idle, %d deferred summaries written", session_id,
                             done)
                finally:
                    await self.leases.give(session_id)
        except (MolError, TimeoutError) as exc:
            log.warning("session %s: its deferred summaries wait for the next turn: %s",
                        session_id, exc)
        if self._turns.get(session_id) == turns and session_id not in self._timers:
            self._turns.pop(session_id, None)  # nothing of it is timed any more
