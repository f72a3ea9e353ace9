"""The checkpoint recorder: a conversation persisted at every consistent point of a turn."""

from __future__ import annotations

from typing import Any

from mol.core import events as ev
from mol.core.awaitables import maybe_await
from mol.runtime.sessions import SessionStore, TurnLog
from mol.runtime.views import Conversation, TurnRecord


class Recorder:
    """Persists a conversation at every harness checkpoint, with the turn's log.

    ``observe`` wraps an event callback to collect what the store records of a
    turn: route decisions, tool calls and results, model calls and their usage
    (text deltas are left out: the answer is in the turn record, which the
    harness fills in at the very checkpoint that commits it).
    """

    def __init__(self, store: SessionStore, hcp_digest: str, parent: str | None = None, *,
                 flush: bool = True) -> None:
        self.store = store
        self.flush = flush
        """False when the caller's own durable commits flush the checkpoints (the server's
        marks, before its reply and after the turn): they then need no flush of their own."""
        self.hcp_digest = hcp_digest
        self.parent = parent
        self.events: list[dict[str, Any]] = []
        self.usage: dict[str, int] = {}
        self._turn: int | None = None
        self._saved = 0

    def observe(self, on_event: ev.OnEvent | None = None) -> ev.OnEvent:
        """An event callback that records, then calls ``on_event``."""

        async def callback(event: ev.Event) -> None:
            if not isinstance(event, ev.TextDelta):
                self.events.append(event.to_dict())
            if isinstance(event, ev.ModelCalled):
                ev.add_usage(self.usage, event.usage)
            if on_event is not None:
                await maybe_await(on_event(event))

        return callback

    async def checkpoint(self, conversation: Conversation, record: TurnRecord,
                         durable: bool = True) -> None:
        """The harness's ``checkpoint``: one transaction with the state and this turn."""
        durable = durable and self.flush
        if self._turn != record.index:
            if self._turn is not None:
                # Events after the earlier turn's last checkpoint (this turn's route) stay.
                self.events = self.events[self._saved:]
                self.usage = _usage(self.events)
            self._turn = record.index
        self._saved = len(self.events)
        log = TurnLog(self.hcp_digest, dict(self.usage), list(self.events))
        await self.store.save(conversation, record, log, parent=self.parent, durable=durable)
        self.parent = None  # recorded with the first save


def _usage(events: list[dict[str, Any]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for event in events:
        if event["type"] == "model_call":
            ev.add_usage(total, event["usage"])
    return total
