"""One turn in progress: the one way its events leave it, the one place its usage is summed,
and the host the agent loop calls back (``mol.runtime.loopio.LoopHost``).

Every event of a turn passes through ``Turn.emit``: it is kept in the turn's result,
counted in its usage when it is a model call, then handed to each of the session's
observers in order (the server's job, its metrics, an eval recording, the CLI's printer).
Checkpoints hand the turn itself to the session's ``checkpoint`` (a store's
``Recorder``), which reads the events and usage kept so far.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from inspect import isawaitable
from typing import Any

from mol.core import events as ev
from mol.core import tracing
from mol.core.tools import Approval, Later
from mol.runtime.hooks import ToolCallInfo
from mol.runtime.views import TurnRecord

Checkpoint = Callable[..., Awaitable[None]]
"""``checkpoint(conversation, record, turn, durable=True)``: persist one consistent point
with what ``turn`` logged so far (``turn.events``, ``turn.usage``; ``turn`` is None for a
point outside a turn); ``durable=False`` for a point nothing was told about yet
(``SessionStore.save``)."""


@dataclass
class TurnResult:
    """The outcome of a turn, as the client may see it (the summary is not in it)."""

    adapter: str
    answer: str
    status: str
    """``complete``, or ``waiting`` for the results of ``client_calls``."""
    client_calls: list[dict[str, Any]] = field(default_factory=list)
    asked: list[dict[str, Any]] = field(default_factory=list)
    """Calls waiting for a person's approval (``ClientToolsRequested.asked``)."""
    stopped: str = ""
    events: list[ev.Event] = field(default_factory=list)
    tally: ev.TurnUsage = field(default_factory=ev.TurnUsage)
    """What the turn's model calls used (summed as they happened, by ``Turn.emit``)."""
    route: str = ev.ROUTED
    """How the adapter was chosen: ``routed``, ``fallback`` or ``pinned``."""
    reasoning: str = ""
    """The engine's reasoning on the last reply."""

    @property
    def usage(self) -> dict[str, int]:
        """Prompt and completion tokens of the whole turn (``tally.totals()``)."""
        return self.tally.totals()


class Turn:
    """A turn of ``session`` while it runs (and after, as the session's ``current``)."""

    def __init__(self, session: Any, result: TurnResult) -> None:
        self.session = session
        """The ``Session`` running the turn (its observers, checkpoint, approver, ids)."""
        self.result = result
        self.record: TurnRecord | None = None
        """The turn's record in the conversation, once it has one."""
        self.adapter = ""
        """The adapter whose view the loop commits to."""
        self.opens = False
        """The next commit opens the adapter's part of the turn (it carries the other
        adapters' pending summaries, then consumed); False when it resumes a waiting turn."""
        self.reviewer: Callable[[str], Awaitable[str | None]] | None = None
        """The GenUI repair rounds of the adapter answering, when it has them on."""
        self.events = result.events
        """The turn's events so far, in order."""
        self.usage = result.tally
        """What the turn's model calls used so far."""

    async def emit(self, event: ev.Event) -> None:
        """Keep ``event``, count it, and tell every observer, in order (an observer may be
        sync or async)."""
        self.events.append(event)
        if isinstance(event, ev.ModelCalled):
            self.usage.add(event)
        for observer in self.session.observers:
            told = observer(event)
            if isawaitable(told):
                await told

    async def checkpoint(self, durable: bool = True) -> None:
        """Persist the conversation at this point, with this turn's record and log."""
        checkpoint = self.session.checkpoint
        if checkpoint is not None:
            await checkpoint(self.session.conversation, self.record, self, durable=durable)

    # -- the loop's host --------------------------------------------------------------------

    async def commit(self, messages: list[dict[str, Any]], answer: str | None = None,
                     waiting: bool = False) -> None:
        """Append ``messages`` to the answering adapter's view, then checkpoint; ``waiting``:
        they leave calls open for the client, and the turn waits from this checkpoint on."""
        assert self.record is not None
        self.session.conversation.commit(self.adapter, messages, opened=self.opens)
        self.opens = False
        if answer is not None:
            self.record.answer = answer  # stored with the checkpoint that stores the answer
        if waiting:  # stored before anyone is told: a wait survives the process
            self.record.status = "waiting"
        await self.checkpoint()

    async def approve(self, call: ToolCallInfo) -> Approval | Later | None:
        """A person's answer for an ``ask`` tool's call (the conversation's remembered one
        first); None when nobody can answer; ``LATER`` when the person answers after the
        turn (the call is remembered as asked, ``Conversation.asked``)."""
        conversation = self.session.conversation
        remembered = conversation.approvals.get(call.name)
        if remembered is None and self.session.approve is None:
            return None
        with tracing.span("approval", tool=call.name, call_id=call.call_id):
            if remembered is not None:
                answer = Approval(remembered, always=True)
            else:
                given = await self.session.approve(call)
                if isinstance(given, Later):  # stored with the commit that leaves the call open
                    conversation.ask(call.call_id, call.name, call.arguments, call.source)
                    return given
                answer = given if isinstance(given, Approval) else Approval(bool(given))
            await self.answered(call, answer, remembered is not None)
        return answer

    async def answered(self, call: ToolCallInfo, answer: Approval,
                       remembered: bool = False) -> None:
        """Tell the turn's observers of ``answer`` to ``call`` (an ``approval`` event); a
        person's ``always`` answer is remembered by the conversation."""
        if answer.always and not remembered:  # stored with the turn's next checkpoint
            self.session.conversation.approvals[call.name] = answer.allow
        await self.emit(ev.Approved(call.name, call.call_id, answer.allow, answer.always,
                                    remembered, answer.reason))

    async def review(self, answer: str) -> str | None:
        """The reviewer's feedback on ``answer`` (None: accepted, or no reviewer)."""
        return None if self.reviewer is None else await self.reviewer(answer)

    def new_id(self, adapter: str) -> str:
        """A new tool call's mol id, from the session's issuer."""
        return self.session.call_ids(adapter)

    async def fit(self, view: list[dict[str, Any]], pending: list[dict[str, Any]],
                  tools: list[dict[str, Any]] | None, budget: int,
                  overflowed: bool = False) -> list[dict[str, Any]] | None:
        """The adapter's view compacted when the request would not fit its window."""
        from mol.runtime import compaction

        return await compaction.fit(self, self.adapter, view, pending, tools, budget,
                                    overflowed)

    def measured(self, messages: list[dict[str, Any]], usage: Any) -> None:
        """Keep the engine's count of a request, for the next estimate."""
        from mol.runtime import compaction

        compaction.measured(self.session, self.adapter, messages, usage)
