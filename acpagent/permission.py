"""A person's yes for an ``ask`` tool, through the editor: ``session/request_permission``.

The editor is shown the call as a tool call (its title, kind, the complete arguments as
``rawInput`` and, for clients that show content only, as escaped JSON) and four options;
the one chosen is a ``mol.core.tools.Approval``:

=================  ======================================================
option             Approval
=================  ======================================================
``allow_once``     allow this call
``allow_always``   allow it and every later call of the tool in this conversation
``reject_once``    refuse this call (the adapter reads that it was refused)
``reject_always``  refuse it and every later call of the tool in this conversation
(cancelled)        refuse it: the prompt was cancelled
=================  ======================================================

"Always" answers are remembered by the conversation and stored with it
(``Conversation.approvals``), so a loaded session keeps them.
"""

from __future__ import annotations

import logging
from typing import Any

from mol.acpagent.sdk import CLIENT_METHODS
from mol.acpagent.text import call_text, escaped
from mol.acpagent.updates import tool_content
from mol.core.errors import ClientError
from mol.core.tools import Approval

log = logging.getLogger("mol.acp")

ANSWERS = {"allow_once": Approval(True), "allow_always": Approval(True, always=True),
           "reject_once": Approval(False), "reject_always": Approval(False, always=True)}
"""Each permission option (its id is its kind) and the answer it gives."""


def options(tool: str) -> list[dict[str, str]]:
    """The four options offered for a call of ``tool``."""
    shown = escaped(tool)
    names = {"allow_once": "Allow", "allow_always": f"Always allow {shown} in this conversation",
             "reject_once": "Reject", "reject_always": f"Always reject {shown} in this conversation"}
    return [{"optionId": kind, "name": name, "kind": kind} for kind, name in names.items()]


async def ask(peer: Any, session_id: str, updates: Any, call: Any) -> Approval:
    """Ask the editor whether ``call`` (a ``ToolCallInfo``: the arguments that would run)
    may run; a refusal when the editor cannot answer."""
    view = updates.call_view(call.call_id, call.name, call.arguments)
    view["content"] = [tool_content(call_text(call.name, call.arguments))]
    try:
        response = await peer.request(CLIENT_METHODS["session_request_permission"], {
            "sessionId": session_id, "toolCall": view, "options": options(call.name)})
    except ClientError as exc:
        log.warning("the permission for %s could not be asked: %s", call.name, exc)
        return Approval(False, reason=f"the editor could not be asked: {exc}")
    outcome = response.outcome
    if outcome.outcome == "cancelled":
        return Approval(False, reason="the prompt was cancelled")
    answer = ANSWERS.get(outcome.option_id)
    if answer is None:
        log.warning("the editor chose %r, none of the options offered", outcome.option_id)
        return Approval(False, reason="the editor chose none of the options offered")
    return answer
