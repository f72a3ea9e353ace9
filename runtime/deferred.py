"""Deferred summaries (``[summary] when = "deferred"``): a summary only when a reader needs it.

Eager summaries cost one request after every turn, read by no one until another adapter
answers (if one ever does). Deferred, a turn's summary is not written when it ends: the
turns of one adapter not summarized yet form a *segment*, summarized in one request when
another adapter is about to answer (before its view opens the turn: ``settle``) or when
the conversation goes idle (``Session.settle``: ``mol serve`` after ``idle_after`` quiet
seconds, ``mol chat`` at exit). The segment's summary is then queued for every other
adapter, as one turn's summary is when eager, so every reader gets the same text and every
view stays append-only.

What is still to summarize is derived from the conversation alone (``open_turns``): an
answered turn (its answer committed, whether or not its last checkpoint made it
``complete``) with no summary of its own and in no segment of ``Conversation.segments``.
A process that dies between a turn and its segment's summary therefore loses nothing:
the next one that needs the summary writes it. (The same holds for an eager summary lost
that way: the turn is summarized when another adapter is about to answer.)

Turns of ``summary.skip`` adapters (and every turn when the hop is disabled) cost no
request: they keep their plain record at the end of the turn, as when eager.
"""

from __future__ import annotations

from itertools import groupby
from typing import Any

from mol.runtime import lifecycle, summary
from mol.runtime.views import Conversation, TurnRecord


def deferred(artifact: Any, adapter: str) -> bool:
    """Whether the summary of ``adapter``'s turns waits for a reader."""
    config = artifact.doc.summary
    return config.when == "deferred" and config.enabled and adapter not in config.skip


def open_turns(conversation: Conversation) -> list[TurnRecord]:
    """The answered turns whose summary is not written yet, in order: complete ones, and
    those interrupted after their answer was committed (a process that died before the
    turn's last checkpoint; its answer reached the client)."""
    covered = {index for segment in conversation.segments for index in segment["turns"]}
    return [t for t in conversation.turns if t.status in ("complete", "interrupted")
            and t.adapter and t.answer and not t.summary and t.index not in covered]


def open_segments(conversation: Conversation,
                  reader: str | None = None) -> list[list[TurnRecord]]:
    """The open turns in segments (runs of one adapter's turns, in order), leaving out the
    segment of ``reader`` (the adapter about to answer: its own view has those turns)."""
    runs = [list(run) for _, run in groupby(open_turns(conversation), key=lambda t: t.adapter)]
    return [run for run in runs if run[0].adapter != reader]


async def settle(session: Any, turn: Any, reader: str | None = None) -> int:
    """Summarize the open segments ``reader`` has not seen (every one when None: the
    conversation goes idle), one request each, and queue each summary for the adapters
    that did not answer its turns; the ``SubagentStop`` hooks see each summary before it is
    queued and may keep it from them. Returns how many segments were summarized."""
    conversation, artifact = session.conversation, session.artifact
    segments = open_segments(conversation, reader)
    for records in segments:
        adapter, last = records[0].adapter, records[-1]
        text, ok = await summary.write(session.engine, artifact, records,
                                       conversation.view(adapter), turn.emit)
        handed = await lifecycle.subagent_stop(session.runtime.hook_sets, conversation.id,
                                               adapter, last.index, last.answer, text,
                                               turn.emit)
        conversation.segments.append({"adapter": adapter, "turns": [r.index for r in records],
                                      "summary": text, "ok": ok})
        if handed.blocked is None:
            conversation.share_summary(adapter, text, artifact.doc.adapter_names,
                                       "\n\n".join(r.user for r in records))
    return len(segments)


def segment_of(conversation: Conversation, index: int) -> dict[str, Any] | None:
    """The deferred segment turn ``index`` belongs to, once summarized."""
    return next((s for s in conversation.segments if index in s["turns"]), None)
