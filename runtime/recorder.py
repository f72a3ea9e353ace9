"""The checkpoint recorder: a conversation persisted at every consistent point of a turn."""

from __future__ import annotations

from typing import Any

from mol.core import events as ev
from mol.runtime.sessions import SessionStore, TurnLog
from mol.runtime.views import Conversation, TurnRecord


class Recorder:
    """Persists a conversation at every checkpoint of a session, with the turn's log.

    ``checkpoint`` is a session's ``checkpoint``: it stores the conversation and the turn's
    record with what the turn logged so far (route decisions, tool calls and results, model
    calls and their usage, as the turn kept them; text deltas are left out: the answer is
    in the turn record, which is filled in at the very checkpoint that commits it).
    """

    def __init__(self, store: SessionStore, hcp_digest: str, parent: str | None = None, *,
                 flush: bool = True) -> None:
        self.store = store
        self.flush = flush
        """False when the caller's own durable commits flush the checkpoints (the server's
        marks, before its reply and after the turn): they then need no flush of their own."""
        self.hcp_digest = hcp_digest
        self.parent = parent
        self._turn: Any = None
        self._logged: list[dict[str, Any]] = []
        self._read = 0
        """How many of the turn's events ``_logged`` holds (as dicts, deltas left out)."""

    async def checkpoint(self, conversation: Conversation, record: TurnRecord | None,
                         turn: Any = None, durable: bool = True) -> None:
        """One transaction with the state and ``record`` (and ``turn``'s log, when given:
        a ``mol.runtime.turn.Turn``); without a record (a compaction asked for between
        turns), the state alone."""
        log = TurnLog(self.hcp_digest, {}, [])
        if turn is not None and record is not None:
            if turn is not self._turn:
                self._turn, self._logged, self._read = turn, [], 0
            events = turn.events
            self._logged += [e.to_dict() for e in events[self._read:]
                             if not isinstance(e, ev.TextDelta)]
            self._read = len(events)
            log = TurnLog(self.hcp_digest, turn.usage.totals(), list(self._logged))
        await self.store.save(conversation, record, log, parent=self.parent,
                              durable=durable and self.flush, turns=record is not None)
        self.parent = None  # recorded with the first save
