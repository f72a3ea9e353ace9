"""MCP elicitation through the server: a request for input reaches the API client as a call.

A client opts in by declaring a function tool named ``mcp_elicitation``
(``TOOL``) in the ``tools`` of a chat completion or a response; it is taken out
of the tools the model sees. When an MCP server elicits during a tool call of
such a turn (``ToolContext.elicit``, set per turn by the runner), the current
reply ends as one client call of that tool, with a fresh call id and the
arguments ``{server, mode, message, requestedSchema}`` (form) or ``{server,
mode, message, url, elicitationId}`` (URL). The turn stays suspended inside the
MCP call: it keeps the conversation's lease (another request on the
conversation gets the usual 409), but gives its turn slot back, so waiting
turns block nobody.

The next request carrying a result for that call id (``function_call_output``
after ``previous_response_id``, or a ``tool`` message after the history) is
the answer: JSON ``{"action": "accept"|"decline"|"cancel", "content": {...}}``,
the content of an accepted form, with the schema's defaults for what it leaves out
(SEP-1034), checked against the requested schema. A
malformed answer is a 400 naming the field, and the turn stays suspended; a
good one resumes it, and the rest of the turn (the final answer) is that
request's reply. Without an answer within ``wait`` seconds the elicitation is
declined and the turn finishes; a later answer is a 409. At shutdown every
suspended elicitation is cancelled, so the turns end within the drain.

Without the tool, or under ``[mcp_servers.X] elicitation = "decline"``
(``mol.runtime.mcp.answers``), servers' requests are declined. The call never
enters an adapter's view: the engine never sees it.
"""

from __future__ import annotations

import json
import logging
import math
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from mol.core import events as ev
from mol.core.deadlines import paused
from mol.core.errors import AnswerEnded, ConversationError, SessionBusy
from mol.core.schemas import compile_schema, with_defaults
from mol.core.tools import ELICIT_ACTIONS as ACTIONS
from mol.runtime import new_call_id
from mol.server.turns.jobs import Job, TurnRequest

log = logging.getLogger("mol.server")

TOOL = "mcp_elicitation"
"""The function tool a client declares to answer MCP servers' requests for input."""
WAIT = 300.0
"""Seconds a suspended turn waits for the client's answer by default, then declines."""
ENDED = 4096
"""Elicitations remembered after they ended, so a late answer gets a clear 409."""

@dataclass(eq=False)
class Pending:
    """One elicitation waiting for the client's answer."""

    call_id: str
    params: dict[str, Any]
    head: Job
    """The first job of the suspended turn."""
    until: float = math.inf
    """When the wait for the answer ends (event-loop time)."""
    answer: dict[str, Any] | None = None
    answered: anyio.Event = field(default_factory=anyio.Event)


class Elicitations:
    """The elicitations of one runner's turns waiting for their clients, by call id."""

    def __init__(self, hand_over: Callable[[Job], None], wait: float = WAIT) -> None:
        self.hand_over = hand_over
        """Called with the job whose reply ends with an elicitation (it gives its slot back)."""
        self.wait = wait
        self.pending: dict[str, Pending] = {}
        self.ended: OrderedDict[str, str] = OrderedDict()
        """Call id -> how it ended (answered, unanswered), for late answers."""
        self.closing = False

    async def ask(self, head: Job, server: str, params: dict[str, Any]) -> dict[str, Any]:
        """An MCP server's request for input during the turn started by ``head``, asked of
        its client (one at a time): the turn's ``ToolContext.elicit``, with ``head``
        bound."""
        async with head.flight.asking:
            return await self._ask(head, server, params)

    async def _ask(self, head: Job, server: str, params: dict[str, Any]) -> dict[str, Any]:
        job = head.current()
        why = ("the server is shutting down" if self.closing else
               f"the client did not declare the {TOOL} tool" if not job.request.elicit else
               "the reply is complete" if job.replied else "")
        if why:
            log.info("MCP server %r asked for input; declined (%s)", server, why)
            return {"action": "decline"}
        conversation = head.flight.conversation
        assert conversation is not None
        adapter = conversation.turns[-1].adapter
        pending = Pending(new_call_id(adapter), params, head,
                          until=anyio.current_time() + self.wait)
        call = {"id": pending.call_id, "type": "function",
                "function": {"name": TOOL, "arguments": json.dumps(arguments(server, params))}}
        self.pending[pending.call_id] = pending
        self.hand_over(job)
        job.put(ev.ClientToolsRequested(adapter, [call]))
        log.info("MCP server %r asked for input; waiting for the client (%s)", server,
                 pending.call_id)
        late = False
        try:
            # The wait does not count against the turn's deadline; it has a bound of its own.
            with paused(head.flight.limit), anyio.move_on_after(self.wait) as waiting:
                await pending.answered.wait()
            late = waiting.cancelled_caught
        finally:  # also when the MCP call ended first (``Answers.calling`` ends the wait)
            self.pending.pop(pending.call_id, None)
            self._ended(pending.call_id, "was answered already" if pending.answer else
                        f"got no answer within {self.wait:g} s and was declined" if late
                        else "ended before the answer came (its MCP tool call ended)")
        return pending.answer or {"action": "decline"}

    def _ended(self, call_id: str, why: str) -> None:
        self.ended[call_id] = why
        while len(self.ended) > ENDED:
            self.ended.popitem(last=False)

    def claim(self, request: TurnRequest) -> tuple[Pending, dict[str, Any]] | None:
        """The elicitation ``request`` answers and the answer, or None when it answers
        none; ``ConversationError`` for a malformed answer (the turn stays suspended),
        ``AnswerEnded`` for a late one."""
        ours = [c for c in request.tool_results or {} if c in self.pending or c in self.ended]
        if not ours:
            return None
        call_id = ours[0]
        where = request.result_fields.get(call_id, request.where)
        if call_id not in self.pending:
            raise AnswerEnded(f"'{where}' {call_id!r}: that {TOOL} call "
                              f"{self.ended[call_id]}", field=where)
        if len(request.tool_results or {}) > 1:
            raise ConversationError(f"'{where}' answers an {TOOL} call: send its result "
                                    "alone", field=where)
        pending = self.pending[call_id]
        answer = parse_answer(request.tool_results[call_id],  # type: ignore[index]
                              pending.params, request.content_field(call_id))
        return pending, answer

    def check_free(self, session_id: str) -> None:
        """``SessionBusy`` when a turn of ``session_id`` is suspended: it would wait for the
        answer."""
        for pending in self.pending.values():
            if pending.head.flight.session_id == session_id:
                raise SessionBusy(f"the conversation's turn waits for the client's answer "
                                  f"to the {TOOL} call {pending.call_id!r}; answer it first",
                                  retry_after=max(1.0, pending.until - anyio.current_time()))

    def resume(self, pending: Pending, answer: dict[str, Any], job: Job) -> None:
        """Answer ``pending``: its turn goes on in ``job`` (``AnswerEnded`` when it ended
        meanwhile)."""
        if self.pending.pop(pending.call_id, None) is not pending:
            raise AnswerEnded(f"the {TOOL} call {pending.call_id!r} "
                              f"{self.ended.get(pending.call_id, 'ended')}")
        head = pending.head
        head.current().next = job
        job.flight = flight = head.flight
        if flight.session is not None and flight.session.current is not None:
            job.usage_base = flight.session.current.usage.copy()  # its reply's usage starts here
        if flight.route is not None:
            job.put(flight.route)  # the reply's x-mol-adapter / x-mol-route
        pending.answer = answer
        pending.answered.set()

    def close(self) -> None:
        """Shutdown: cancel every suspended elicitation (their turns then finish)."""
        self.closing = True
        for pending in list(self.pending.values()):
            pending.answer = {"action": "cancel"}
            pending.answered.set()


def arguments(server: str, params: dict[str, Any]) -> dict[str, Any]:
    """The ``mcp_elicitation`` call's arguments for an ``elicitation/create`` request."""
    mode = params.get("mode") or "form"
    out: dict[str, Any] = {"server": server, "mode": mode, "message": params.get("message", "")}
    if mode == "url":
        out.update(url=params.get("url", ""), elicitationId=params.get("elicitationId", ""))
    else:
        out["requestedSchema"] = params.get("requestedSchema") or {"type": "object",
                                                                   "properties": {}}
    return out


def parse_answer(text: str, params: dict[str, Any], where: str) -> dict[str, Any]:
    """The ``ElicitResult`` a client's answer ``text`` gives; a ``ConversationError`` naming
    ``where`` otherwise."""
    shape = '{"action": "accept" | "decline" | "cancel", "content": {...}}'
    try:
        answer = json.loads(text)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise ConversationError(f"'{where}' must be the JSON answer of the elicitation: "
                                f"{shape}", field=where)
    action = answer.get("action")
    if action not in ACTIONS:
        raise ConversationError(f"'{where}' action must be one of {', '.join(ACTIONS)}; got "
                       f"{json.dumps(action)}", field=where)
    if action != "accept" or (params.get("mode") or "form") != "form":
        return {"action": action}
    content = answer.get("content", {})
    if not isinstance(content, dict):
        raise ConversationError(f"'{where}' content must be an object answering the requested "
                       "schema", field=where)
    schema = params.get("requestedSchema") or {"type": "object"}
    try:
        # What the client left out takes the schema's default (SEP-1034) before the check:
        # a required field with a default may be omitted.
        content = compile_schema(schema).check(with_defaults(schema, content))
    except ValueError as exc:
        raise ConversationError(f"'{where}' content does not answer the requested schema: "
                                f"{exc}", field=where) from None
    return {"action": "accept", "content": content}

