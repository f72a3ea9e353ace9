"""Points of a conversation (marks), forks, and the checkpoint recorder.

Views only grow at their end, so a point of a conversation is fully described
by its view lengths, its pending summaries and its number of turns. A request
that continues from the conversation's current point (or from a point followed
only by interrupted turns) continues it in place; one that continues from an
older point (a regenerated answer, an edited message, an older
``previous_response_id``) forks a new conversation cut at that point: exact,
with no replay and the prefix cache still valid for the shared part.
"""

from __future__ import annotations

import copy
import secrets
from dataclasses import replace
from typing import Any

from mol.runtime import events as ev
from mol.runtime.hooks import maybe_await
from mol.runtime.sessions import SessionStore, TurnLog
from mol.runtime.views import Conversation, TurnRecord


def mark_of(conversation: Conversation) -> dict[str, Any]:
    """The current point of ``conversation``."""
    return {"lengths": {a: len(v) for a, v in conversation.views.items()},
            "pending": copy.deepcopy(conversation.pending),
            "turns": len(conversation.turns)}


def continues_in_place(conversation: Conversation, mark: dict[str, Any]) -> bool:
    """Whether a request from ``mark`` may extend ``conversation`` itself: nothing but
    interrupted turns happened since (their partial views stay, as history)."""
    later = conversation.turns[mark["turns"]:]
    if any(turn.status != "interrupted" for turn in later):
        return False
    lengths = mark["lengths"]
    if later:
        return all(len(conversation.views.get(a, [])) >= n for a, n in lengths.items())
    return all(len(view) == lengths.get(a, 0) for a, view in conversation.views.items())


def fork(conversation: Conversation, mark: dict[str, Any]) -> Conversation:
    """A new conversation equal to ``conversation`` at ``mark``."""
    views = {a: copy.deepcopy(conversation.views.get(a, [])[:n])
             for a, n in mark["lengths"].items()}
    turns = [replace(t, tools=list(t.tools)) for t in conversation.turns[:mark["turns"]]]
    return Conversation(id="conv_" + secrets.token_hex(8), views=views,
                        pending=copy.deepcopy(mark["pending"]), turns=turns)


UNANSWERED = "[no result: the client went on without returning this tool call's result]"


def abandon_waiting(conversation: Conversation) -> TurnRecord | None:
    """A new user turn while the last turn waits for client tool results: the client went
    on without them. Answer the open calls with a placeholder (appended, so the view stays
    a valid transcript and its prefix unchanged) and mark that turn interrupted."""
    if not conversation.turns or conversation.turns[-1].status != "waiting":
        return None
    record = conversation.turns[-1]
    view = conversation.view(record.adapter)
    open_calls: list[str] = []
    for message in view:
        if message.get("role") == "assistant" and message.get("tool_calls"):
            open_calls = [call["id"] for call in message["tool_calls"]]
        elif message.get("role") == "tool" and message.get("tool_call_id") in open_calls:
            open_calls.remove(message["tool_call_id"])
    conversation.commit(record.adapter, [{"role": "tool", "tool_call_id": call_id,
                                          "content": UNANSWERED} for call_id in open_calls])
    record.status = "interrupted"
    return record


class Recorder:
    """Persists a conversation at every harness checkpoint, with the turn's log.

    ``observe`` wraps an event callback to collect what the store records of a
    turn: route decisions, tool calls and results, model calls and their usage
    (text deltas are left out: the answer is in the turn record).
    """

    def __init__(self, store: SessionStore, hcp_digest: str, parent: str | None = None) -> None:
        self.store = store
        self.hcp_digest = hcp_digest
        self.parent = parent
        self.events: list[dict[str, Any]] = []
        self.usage: dict[str, int] = {}
        self._turn: int | None = None
        self._saved = 0
        self._start = 0
        self._last: tuple[Conversation, TurnRecord] | None = None
        self._answer_saved: str | None = None

    def observe(self, on_event: ev.OnEvent | None = None) -> ev.OnEvent:
        """An event callback that records, then calls ``on_event``."""

        async def callback(event: ev.Event) -> None:
            if not isinstance(event, ev.TextDelta):
                self.events.append(event.to_dict())
            if isinstance(event, ev.ModelCalled):
                ev.add_usage(self.usage, event.usage)
            if (isinstance(event, ev.Answered) and self._last is not None
                    and self._answer_saved != event.text):
                # The harness sets the turn's answer just before this event and checkpoints
                # again only after the summary hop: keep the answer if the process dies there.
                await self.checkpoint(*self._last)
            if on_event is not None:
                await maybe_await(on_event(event))

        return callback

    async def checkpoint(self, conversation: Conversation, record: TurnRecord) -> None:
        """The harness's ``checkpoint``: one transaction with the state and this turn."""
        if self._turn != record.index:
            if self._turn is not None:
                # Events after the earlier turn's last checkpoint (this turn's route) stay.
                self.events, self.usage = self.events[self._saved:], _usage(
                    self.events[self._saved:])
            self._turn = record.index
            self._start = len(conversation.views.get(record.adapter) or [])
        self._saved = len(self.events)
        self._last = (conversation, record)
        stored = record
        answer = _final_answer(conversation, record, self._start)
        if answer is not None:
            # The loop just committed the final answer; the harness copies it into the
            # record only after this checkpoint, so store it now rather than in a second
            # transaction (a crash in the summary hop then keeps the answer).
            stored = replace(record, answer=answer, tools=list(record.tools))
        self._answer_saved = stored.answer if stored.status == "running" else None
        log = TurnLog(self.hcp_digest, dict(self.usage), list(self.events))
        await self.store.save(conversation, stored, log, parent=self.parent)
        self.parent = None  # recorded with the first save


def _final_answer(conversation: Conversation, record: TurnRecord, start: int) -> str | None:
    """The answer a running turn committed to its view (past ``start``, the view's length
    when this recorder first saw the turn), before the harness records it."""
    if record.status != "running" or record.answer:
        return None
    view = conversation.views.get(record.adapter) or []
    last = view[-1] if len(view) > start else None
    if last and last.get("role") == "assistant" and not last.get("tool_calls"):
        return last.get("content") or ""
    return None



def _usage(events: list[dict[str, Any]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for event in events:
        if event["type"] == "model_call":
            ev.add_usage(total, event["usage"])
    return total
