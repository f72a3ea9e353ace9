"""Conversations rebuilt from a client's history, and tool results checked against open calls.

A request whose history mol does not know (another server's, a client's that rewrites
messages) is rebuilt: its messages become plain history after each adapter's own system
prompt. Every view so built keeps the tool-call contract (``mol.runtime.views``):

- a tool-call message of the history whose results the client left out gets a placeholder
  result (the call was abandoned); a result answering no open call, or answering one
  twice, is a ``ConversationError`` naming the field;
- when the request ends with tool results, the turn they continue belongs to the adapter
  that issued the calls (encoded in their ids): its view ends with the open tool-call
  message, the results go to it; the other adapters' views stop before that turn's user
  message, and they learn of the turn from its summary, as of any other adapter's turn.

Tool results must answer exactly the calls the waiting turn left open, each once;
anything else is a ``ConversationError`` naming the field in the API's own terms
(``messages[i].tool_call_id``, ``input[i].call_id``).
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from mol.core.errors import ConversationError
from mol.runtime import Conversation, TurnRecord, adapter_of_call, open_calls
from mol.server.turns.marks import UNANSWERED


def repaired(history: Sequence[dict[str, Any]], fields: Sequence[str], open_end: bool
             ) -> list[dict[str, Any]]:
    """``history`` with placeholder results for the calls the client left unanswered (but
    the trailing ones when ``open_end``: the request's results answer those); refused for a
    result that answers no open call. ``fields[i]`` names message ``i``'s call id field."""
    out: list[dict[str, Any]] = []
    waiting: list[str] = []
    for i, message in enumerate(history):
        if message["role"] == "tool":
            if message["tool_call_id"] not in waiting:
                raise ConversationError(f"'{fields[i]}' {message['tool_call_id']!r} answers no "
                               "open tool call of the history (each result follows the "
                               "message issuing its call, once)", field=fields[i])
            waiting.remove(message["tool_call_id"])
        else:
            out += _placeholders(waiting)
            waiting = [c["id"] for c in message.get("tool_calls") or []]
        out.append(message)
    return out if open_end else out + _placeholders(waiting)


def _placeholders(call_ids: list[str]) -> list[dict[str, Any]]:
    return [{"role": "tool", "tool_call_id": call_id, "content": UNANSWERED}
            for call_id in call_ids]


def check_results(open_ids: Sequence[str], results: dict[str, str], fields: dict[str, str],
                  where: str) -> None:
    """``ConversationError`` unless ``results`` answer exactly ``open_ids`` (the waiting
    turn's open calls)."""
    for call_id in results:
        if call_id not in open_ids:
            why = (f"the waiting turn's open calls are {list(open_ids)}" if open_ids else
                   "no turn of this conversation waits for tool results")
            raise ConversationError(f"'{fields[call_id]}' {call_id!r} answers no open call: "
                           f"{why}", field=fields[call_id])
    missing = [call_id for call_id in open_ids if call_id not in results]
    if missing:
        raise ConversationError(f"'{where}' leaves the waiting turn's calls {missing} without "
                       "results; send one result per call", field=where)


def waiting_calls(conversation: Conversation) -> list[str]:
    """The calls a conversation's waiting turn left open (none when no turn waits)."""
    if not conversation.turns or conversation.turns[-1].status != "waiting":
        return []
    return open_calls(conversation.view(conversation.turns[-1].adapter))


async def seed(conversation: Conversation, history: list[dict[str, Any]],
               fields: Sequence[str], results: dict[str, str] | None,
               result_fields: dict[str, str], where: str, adapters: Sequence[str],
               declared: Any, fallback: str,
               prompt: Callable[[str], Awaitable[str]]) -> None:
    """Rebuild ``conversation`` from a client's ``history`` (see the module docstring);
    ``prompt(adapter)`` is the adapter's own system prompt."""
    messages = repaired(history, fields, open_end=bool(results))
    if results:
        check_results(open_calls(messages), results, result_fields, where)
    issuer = adapter_of_call(next(iter(results)), declared) if results else None
    issuer = issuer or fallback
    starts = [i for i, m in enumerate(messages) if m["role"] == "user"]
    opening = next((i for i, m in enumerate(messages) if m["role"] != "system"), 0)
    turn_start = starts[-1] if starts else opening
    # One copy of the history, shared by every view (nothing edits a message in place).
    shared = copy.deepcopy(messages)
    for adapter in adapters:
        own = shared if not results or adapter == issuer else shared[:turn_start]
        conversation.seed_view(adapter, [{"role": "system", "content": await prompt(adapter)},
                                         *own])
    if results:
        user = messages[turn_start]["content"] if starts else ""
        conversation.turns.append(TurnRecord(index=0, adapter=issuer, user=user,
                                             status="waiting"))
