"""Points of a conversation (marks), forks, and the names replies give them.

Views only grow at their end, so a point of a conversation is fully described by its
view lengths, its pending summaries, its number of turns and of deferred summaries
(segments). A request that continues from the conversation's current point (or from a
point followed only by interrupted turns) continues it in place; one that continues from an
older point (a regenerated answer, an edited message, an older
``previous_response_id``) forks a new conversation cut at that point: exact,
with no replay and the prefix cache still valid for the shared part. A fork keeps the
compactions its point had, and none made after it.

A reply names the point where it ends (a response id, the fingerprint of the transcript it
completes) as soon as its answer is known (``Job.ends_at``), before the summary hop ends
the turn (``Names``): the mark is written at once from the conversation as it is then, and
rewritten with the final point when the turn ends (``Names.settle``), so a request
continuing from it meanwhile waits for the conversation's lock, then reads the final mark.
A key forgotten meanwhile (its response deleted) is not written back.
"""

from __future__ import annotations

import copy
import secrets
from dataclasses import replace
from typing import Any

from mol.runtime import Conversation, SessionStore, TurnRecord
from mol.server.turns.jobs import Job


def mark_of(conversation: Conversation) -> dict[str, Any]:
    """The current point of ``conversation`` (its views' lengths and compactions)."""
    return {"lengths": {a: len(v) for a, v in conversation.views.items()},
            "pending": copy.deepcopy(conversation.pending),
            "turns": len(conversation.turns),
            "segments": len(conversation.segments),
            "compactions": {a: len(c) for a, c in conversation.compactions.items() if c}}


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
    # One deepcopy for all views: a message several views share stays one object.
    views = copy.deepcopy({a: conversation.views.get(a, [])[:n]
                           for a, n in mark["lengths"].items()})
    turns = [replace(t, tools=list(t.tools)) for t in conversation.turns[:mark["turns"]]]
    counts = mark.get("compactions") or {}  # a mark from before compaction existed: none
    compactions = {a: copy.deepcopy(done[:counts[a]])
                   for a, done in conversation.compactions.items() if counts.get(a)}
    # Segments summarized after the mark are not the fork's: its turns are summarized anew
    # (``mol.runtime.deferred``), as its pending summaries are the mark's.
    segments = copy.deepcopy(conversation.segments[:mark.get("segments", 0)])
    return Conversation(id="conv_" + secrets.token_hex(8), views=views,
                        pending=copy.deepcopy(mark["pending"]), turns=turns,
                        compactions=compactions, approvals=dict(conversation.approvals),
                        asked=copy.deepcopy(conversation.asked), segments=segments)


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


class Names:
    """The keys named by the replies of turns still running, by key."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self._named: dict[str, Job] = {}
        """Key -> the job that named it, while its turn runs."""

    async def name(self, job: Job, key: str, response: Any = None,
                   aliases: tuple[str, ...] = ()) -> None:
        """Name the point where ``job``'s reply ends by ``key`` and ``aliases`` (with
        ``response``: the Responses API object ``(previous id, body)`` stored under
        ``key``, in the same transaction)."""
        if not job.request.persist:
            return
        session_id, conversation = job.flight.session_id, job.flight.conversation
        if job.mark is not None:
            await self.store.put_mark(key, session_id, job.mark, response, aliases)
            return
        job.keys += [key, *aliases]
        self._named.update(dict.fromkeys([key, *aliases], job))
        assert conversation is not None
        await self.store.put_mark(key, session_id, mark_of(conversation), response, aliases)
        if job.mark is not None:  # the turn ended meanwhile: the final mark wins
            await self.store.put_mark(key, session_id, job.mark, None, aliases)

    def forget(self, key: str) -> None:
        """Do not rewrite ``key`` when its turn ends (a response deleted meanwhile)."""
        job = self._named.pop(key, None)
        if job is not None and key in job.keys:
            job.keys.remove(key)

    async def settle(self, jobs: list[Job], conversation: Conversation,
                     resumed_from: dict[str, Any] | None = None) -> None:
        """The turn of ``jobs`` (a chain) ended: every key they named now names the
        conversation's final point; with ``resumed_from`` (the point where the turn waited
        for a person's approvals), so does every key naming that point: the response that
        asked, as the first job of an elicitation's chain."""
        mark = mark_of(conversation)
        for each in jobs:  # the requests the turn answered, in order
            each.mark = mark
            for key in list(each.keys):
                if key in each.keys:  # not forgotten meanwhile
                    await self.store.put_mark(key, conversation.id, mark)
        if resumed_from is not None and jobs[0].request.persist:
            await self.store.move_marks(conversation.id, resumed_from, mark)

    def drop(self, jobs: list[Job]) -> None:
        """The turn of ``jobs`` is over: their keys need no rewriting any more."""
        for key in [key for each in jobs for key in each.keys]:
            self._named.pop(key, None)
