"""Approvals through the server: a call of an ``ask`` tool waits for a person at the API
client, the turn stored in between, so that the wait outlasts a restart of ``mol serve``
and any replica on the store can take the answer (docs/approvals.md).

Seen from the client, it is the suspension elicitation uses: the reply ends with a request
to the client, the next request answers it as the result of a call id mol issued, and
that request's reply carries the rest of the turn; the conversation is held meanwhile
(409 ``conversation_busy`` with ``Retry-After``), no answer within the wait is a no, and a
late answer is a 409 saying how the request ended. Where the turn waits differs: an MCP
server elicits inside a running tool call, on a live connection, so that turn waits in
memory (``mol.server.turns.elicitation``); an approval comes before its tool runs, so the
turn ends at the call (left open in the adapter's view, remembered in
``Conversation.asked``, checkpointed) and the answer resumes it from the store
(``Session.submit_tool_results(approvals=...)``), on the adapter that issued the call.

- **Asking.** Every Responses turn asks (an ``mcp_approval_request`` output item,
  ``request_fields``); a Chat Completions or Messages client opts in by declaring the
  function tool ``mol_approval`` (``TOOL``), and its reply ends with one call of it per
  approval (``as_calls``). Without either, nobody can approve and the call is refused.
- **Answering.** A result for an asked call (an ``mcp_approval_response`` item, or the
  ``mol_approval`` call's result) is the person's decision, ``{"approve": bool, "reason"?:
  str, "always"?: bool}`` (``decision``); one that does not parse is a 400 naming the
  field, and the turn goes on waiting. ``always`` is remembered by the conversation
  (``Conversation.approvals``): later calls of the tool are not asked about.
- **Holding.** A new user turn while approvals wait is ``SessionBusy`` (409, ``Retry-After``
  until the wait ends).
- **Timeouts.** ``[server] approval_timeout_sec``, or the MCP server's own. Every replica
  that saw a wait (asked it, took a request about it, or found it in the store at start:
  ``SessionStore.asking``) keeps a timer for it; at its end a turn in the background denies
  what nobody answered, and the adapter goes on. A late answer is ``ApprovalEnded`` (409).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup

from mol.core.errors import (
    ApprovalEnded,
    ConversationError,
    MolError,
    Overloaded,
    SessionBusy,
)
from mol.core.tools import Approval
from mol.runtime import Conversation
from mol.server.turns.jobs import TurnRequest
from mol.server.turns.seeding import waiting_calls

log = logging.getLogger("mol.server")

TOOL = "mol_approval"
"""The function tool a Chat Completions (or Messages) client declares to answer approvals."""
LABEL = "mol"
"""The ``server_label`` of mol's own tools (built-ins and plugins); an MCP tool's is the
name of its server."""
ANSWER_FIELDS = ("approve", "reason", "always")
"""The fields of a decision (``approve`` required)."""
RETRY = 5.0
"""Seconds before a timer whose denial could not start (no turn slot, the conversation
busy) tries again."""


def mcp_server(source: str) -> str | None:
    """The MCP server a tool from ``source`` (``Tool.source``) belongs to, if any."""
    kind, _, name = source.partition(":")
    return name if kind == "mcp" and name else None


def label(source: str) -> str:
    """The ``server_label`` of a tool from ``source``."""
    return mcp_server(source) or LABEL


def request_fields(asked: dict[str, Any]) -> dict[str, str]:
    """``server_label``, ``name`` (as the adapter called the tool) and ``arguments`` (the
    complete JSON text the tool will run with, every non-ASCII and control character
    escaped) of an approval request for the call ``asked`` (``ClientToolsRequested.asked``)."""
    return {"server_label": label(asked.get("source", "")), "name": asked["name"],
            "arguments": json.dumps(asked["arguments"], ensure_ascii=True)}


def as_calls(asked: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``mol_approval`` calls that ask a client for the approvals ``asked``: each the
    id of the call it is about, its arguments ``{server_label, name, arguments}`` (the
    call's arguments as an object)."""
    return [{"id": each["id"], "type": "function", "function": {
        "name": TOOL, "arguments": json.dumps(
            {**request_fields(each), "arguments": each["arguments"]}, ensure_ascii=True)}}
        for each in asked]


def decision(text: str, where: str) -> Approval:
    """The person's answer the result ``text`` carries; a ``ConversationError`` naming
    ``where`` otherwise."""
    shape = '{"approve": true | false, "reason": "...", "always": true | false}'
    try:
        answer = json.loads(text)
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or "approve" not in answer:
        raise ConversationError(f"'{where}' must be the JSON answer of the approval request: "
                                f"{shape} (approve is required)", field=where)
    unknown = sorted(set(answer) - set(ANSWER_FIELDS))
    if unknown:
        raise ConversationError(f"'{where}' has an unknown field {unknown[0]!r}: an approval "
                                f"answer takes {', '.join(ANSWER_FIELDS)}", field=where)
    reason = answer.get("reason") or ""
    for name, value, kind in [("approve", answer["approve"], bool), ("reason", reason, str),
                              ("always", answer.get("always", False), bool)]:
        if not isinstance(value, kind):
            raise ConversationError(f"'{where}' {name} must be a "
                                    f"{'boolean' if kind is bool else 'string'}", field=where)
    return Approval(answer["approve"], answer.get("always", False), reason)


def waiting(conversation: Conversation) -> dict[str, dict[str, Any]]:
    """The calls the conversation's waiting turn left open for a person's answer."""
    asked = conversation.asked
    return {call_id: asked[call_id] for call_id in waiting_calls(conversation)
            if call_id in asked and "ended" not in asked[call_id]}


class Approvals:
    """The approval waits of the conversations this replica saw: the checks of the requests
    that continue them, and the timers that deny what nobody answered in time."""

    def __init__(self, doc: Any, expire: Callable[[str], Awaitable[None]]) -> None:
        self.doc = doc
        """The artifact's document (``[server]`` and the MCP servers' waits)."""
        self.expire = expire
        """Runs the turn that denies a conversation's expired approvals (``Runner``)."""
        self._due: dict[str, float] = {}
        """Conversation -> when its first wait ends (wall-clock time: waits are stored)."""
        self._changed = anyio.Event()

    def wait(self, asked: dict[str, Any]) -> float:
        """Seconds the call ``asked`` waits for its answer."""
        server = self.doc.mcp_servers.get(mcp_server(str(asked.get("source", ""))))
        own = server.approval_timeout_sec if server is not None else None
        return own if own is not None else self.doc.server.approval_timeout_sec

    def until(self, asked: dict[str, Any]) -> float:
        """When the wait of the call ``asked`` ends (wall-clock time)."""
        return float(asked.get("asked_at", 0.0)) + self.wait(asked)

    def arm(self, session_id: str, asked: dict[str, dict[str, Any]]) -> None:
        """Deny what of ``asked`` (a conversation's waiting calls) nobody answered when its
        wait ends."""
        due = min((self.until(each) for each in asked.values()), default=math.inf)
        if due < self._due.get(session_id, math.inf):
            self._due[session_id] = due
            self._changed.set()

    def disarm(self, session_id: str) -> None:
        """``session_id`` waits for nothing any more (on this replica's knowledge)."""
        self._due.pop(session_id, None)

    def expired(self, conversation: Conversation) -> dict[str, Approval]:
        """The denials of the conversation's waiting calls whose wait has ended."""
        now = time.time()
        return {call_id: Approval(False, reason=f"nobody answered within "
                                                f"{self.wait(asked):g} s")
                for call_id, asked in waiting(conversation).items()
                if self.until(asked) <= now}

    def check(self, conversation: Conversation, request: TurnRequest) -> None:
        """Check ``request`` against the approvals ``conversation`` waits for, and keep the
        answers it carries in ``request.approvals``: ``SessionBusy`` for a new turn while
        they wait, ``ApprovalEnded`` for an answer to one that ended, a
        ``ConversationError`` naming the field for an answer that does not parse or answers
        no approval request."""
        open_now = waiting(conversation)
        if open_now and request.persist:
            self.arm(conversation.id, open_now)
        now = time.time()
        if request.text is not None and open_now:
            call_id, asked = min(open_now.items(), key=lambda item: self.until(item[1]))
            raise SessionBusy(f"the conversation's turn waits for a person's approval of "
                              f"{asked['name']} ({call_id!r}); answer it first",
                              retry_after=max(1.0, self.until(asked) - now))
        for call_id, text in (request.tool_results or {}).items():
            where = request.result_fields.get(call_id, request.where)
            asked = conversation.asked.get(call_id)
            if asked is not None and "ended" in asked:
                raise ApprovalEnded(f"'{where}' {call_id!r}: that approval request "
                                    f"{asked['ended']}", field=where)
            if call_id in open_now:
                if self.until(open_now[call_id]) <= now:  # its denial is on its way
                    raise ApprovalEnded(f"'{where}' {call_id!r}: that approval request got "
                                        f"no answer within {self.wait(open_now[call_id]):g} s "
                                        "and is denied", field=where)
                request.approvals[call_id] = decision(text, request.content_field(call_id))
            elif call_id in request.approval_answers:
                raise ConversationError(f"'{where}' {call_id!r} answers no approval request "
                                        "the conversation waits for", field=where)

    async def run(self, group: TaskGroup) -> None:
        """Deny what nobody answered as the waits end, each in a task of ``group`` (the
        runner's); runs until cancelled with it."""
        while True:
            self._changed = anyio.Event()
            due = min(self._due.values(), default=math.inf)
            with anyio.move_on_after(max(0.0, due - time.time())):
                await self._changed.wait()
            now = time.time()
            for session_id, until in list(self._due.items()):
                if until <= now:
                    del self._due[session_id]
                    group.start_soon(self._deny, session_id)

    async def _deny(self, session_id: str) -> None:
        try:
            await self.expire(session_id)
        except (Overloaded, SessionBusy) as exc:  # no turn slot, or a turn holds it
            log.info("session %s: the approvals nobody answered are denied in %g s (%s)",
                     session_id, RETRY, exc)
            if time.time() + RETRY < self._due.get(session_id, math.inf):
                self._due[session_id] = time.time() + RETRY
                self._changed.set()
        except MolError as exc:
            log.warning("session %s: the approvals nobody answered could not be denied: %s",
                        session_id, exc)
