"""Request bodies of both APIs in mol's plain message form, checked field by field.

Chat Completions ``messages`` (here) and Responses ``input`` items
(``mol.server.api.inputs``) both become chat-shaped messages (``role``,
``content``, ``tool_calls``, ``tool_call_id``); every problem is a 400 naming the
field in that API's own terms. ``split`` separates the history from the new user
turn or the trailing tool results; ``fingerprint`` names a client-visible
transcript, canonically, so a client that re-serializes what it was sent (tool-call
arguments with other spacing or key order) still names the same point.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Sequence
from typing import Any, NamedTuple

from mol.runtime import adapter_of_call
from mol.server.http.bodies import field, json_kind
from mol.server.http.errors import ApiError
from mol.server.turns.jobs import TurnRequest

ROLES = ("system", "developer", "user", "assistant", "tool")

MAX_MESSAGES = 4096
"""Most messages (Chat Completions) or input items (Responses) in one request."""
MAX_ITEMS = 1024
"""Most content parts, tool calls or tools in one list of a request."""

def bounded(items: list[Any], where: str, limit: int = MAX_ITEMS) -> list[Any]:
    """``items``, or a 400 naming ``where`` when it holds more than ``limit`` entries."""
    if len(items) > limit:
        raise ApiError(400, f"'{where}' holds {len(items)} entries; at most {limit} are "
                       "allowed", param=where, code="too_many_items")
    return items


def fingerprint(messages: list[dict[str, Any]], kind: str = "chat") -> str:
    """A digest of a client-visible transcript (normalized messages): canonical JSON of
    each message's role, content, tool calls (arguments parsed and re-serialized with
    sorted keys, compact) and tool call id. ``kind`` names the API (``chat``, ``resp``)."""
    canonical = json.dumps([_canonical(m) for m in messages], sort_keys=True,
                           separators=(",", ":"), ensure_ascii=False)
    return f"{kind}:" + hashlib.sha256(canonical.encode()).hexdigest()


def _canonical(message: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message["role"], "content": message.get("content") or ""}
    if message.get("tool_calls"):
        out["tool_calls"] = [[c["id"], c["function"]["name"],
                              canonical_arguments(c["function"]["arguments"])]
                             for c in message["tool_calls"]]
    if message.get("tool_call_id") is not None:
        out["tool_call_id"] = message["tool_call_id"]
    return out


def canonical_arguments(arguments: str) -> str:
    """Tool-call arguments as canonical JSON (sorted keys, compact); the text as it is when
    it is not JSON."""
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):
        return arguments
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def role_of(raw: Any, where: str, roles: Sequence[str] = ROLES) -> str:
    """The ``role`` of the client message ``raw`` at ``where``: an object with one of
    ``roles``, else a 400 naming the field."""
    if not isinstance(raw, dict):
        raise ApiError(400, f"'{where}' must be an object", param=where)
    role = field(raw, "role", str, required=True, where=f"{where}.")
    if role not in roles:
        raise ApiError(400, f"'{where}.role' must be one of {', '.join(roles)}; got {role!r}",
                       param=f"{where}.role")
    return role


def normalize(raw: Any, where: str) -> dict[str, Any]:
    """One client message in mol's plain form, checked field by field."""
    role = role_of(raw, where)
    message: dict[str, Any] = {"role": "system" if role == "developer" else role,
                               "content": text_of(raw.get("content"), f"{where}.content")}
    if role == "tool":
        message["tool_call_id"] = field(raw, "tool_call_id", str, required=True,
                                        where=f"{where}.")
    if role == "assistant" and raw.get("tool_calls"):
        calls = bounded(field(raw, "tool_calls", list, where=f"{where}."),
                        f"{where}.tool_calls")
        message["tool_calls"] = [_call(c, f"{where}.tool_calls[{i}]") for i, c in
                                 enumerate(calls)]
    return message


def _call(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ApiError(400, f"'{where}' must be an object", param=where)
    function = field(raw, "function", dict, required=True, where=f"{where}.")
    return {"id": field(raw, "id", str, required=True, where=f"{where}."), "type": "function",
            "function": {"name": field(function, "name", str, required=True,
                                       where=f"{where}.function."),
                         "arguments": field(function, "arguments", str, default="",
                                            where=f"{where}.function.")}}


class Split(NamedTuple):
    """A request's messages, taken apart."""

    history: list[dict[str, Any]]
    """Everything before the new turn (or before the trailing tool results)."""
    text: str | None
    """The new user turn, or None when tool results continue a waiting turn."""
    results: dict[str, str] | None
    """Call id -> result content, in the request's order."""
    fields: dict[str, str]
    """Call id -> the request field holding it (``messages[3].tool_call_id``), for errors."""


def split(messages: list[dict[str, Any]], adapters: Collection[str], where: str = "messages",
          fields: Sequence[str] | None = None) -> Split:
    """The new last message (or trailing tool results, answering calls mol issued to one of
    ``adapters``, each once) separated from the history before it. ``fields[i]`` names
    message ``i``'s call id field in the request (default ``{where}[i].tool_call_id``)."""
    if not messages:
        raise ApiError(400, f"'{where}' must not be empty", param=where)
    if messages[-1]["role"] == "user":
        return Split(messages[:-1], messages[-1]["content"], None, {})
    if messages[-1]["role"] != "tool":
        raise ApiError(400, f"the last entry of '{where}' must be a user message or tool "
                       f"results, got role {messages[-1]['role']!r}", param=where)
    start = len(messages)
    while start > 0 and messages[start - 1]["role"] == "tool":
        start -= 1
    results: dict[str, str] = {}
    named: dict[str, str] = {}
    for i in range(start, len(messages)):
        call_id = messages[i]["tool_call_id"]
        param = fields[i] if fields is not None else f"{where}[{i}].tool_call_id"
        if adapter_of_call(call_id, adapters) is None:
            raise ApiError(400, f"'{param}' {call_id!r} was not issued by mol (ids look like "
                           "call_L2_...)", param=param)
        if call_id in results:
            raise ApiError(400, f"'{param}' answers {call_id!r} a second time (first at "
                           f"'{named[call_id]}'); each call takes one result", param=param)
        results[call_id], named[call_id] = messages[i]["content"], param
    return Split(messages[:start], None, results, named)


def transcript_turn(messages: list[dict[str, Any]], adapters: Collection[str], *,
                    kind: str = "chat", where: str = "messages",
                    fields: Sequence[str] | None = None, **options: Any) -> TurnRequest:
    """The turn a request asks for when its client resends the whole transcript (Chat
    Completions, the Anthropic Messages API): ``messages`` split into the history and the
    new user turn or tool results. The history names the point it continues (its
    fingerprint, of ``kind``), or seeds a conversation mol does not know; ``fields[i]``
    names message ``i``'s call id field for errors. ``options`` are further
    ``TurnRequest`` fields."""
    history, text, results, named = split(messages, adapters, where, fields)
    return TurnRequest(text=text, tool_results=results, result_fields=named, where=where,
                       key=fingerprint(history, kind) if history else None, seed=history,
                       seed_fields=list(fields[:len(history)]) if fields is not None else [],
                       **options)


def client_tools(body: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The request's ``tools`` (Chat Completions shape), checked."""
    tools = field(body, "tools", list)
    if tools is None:
        return None
    for i, tool in enumerate(bounded(tools, "tools")):
        where = f"tools[{i}]"
        if not isinstance(tool, dict) or tool.get("type") != "function":
            raise ApiError(400, f"'{where}' must be an object with type 'function'", param=where)
        function = field(tool, "function", dict, required=True, where=f"{where}.")
        field(function, "name", str, required=True, where=f"{where}.function.")
    return tools


def text_of(content: Any, where: str) -> str:
    """A message ``content``: a string, an array of text parts, or null."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        parts = []
        for i, part in enumerate(bounded(content, where)):
            if not isinstance(part, dict):
                raise ApiError(400, f"'{where}[{i}]' must be an object", param=f"{where}[{i}]")
            if part.get("type") in ("text", "input_text", "output_text"):
                if not isinstance(part.get("text"), str):
                    raise ApiError(400, f"'{where}[{i}].text' must be a string",
                                   param=f"{where}[{i}].text")
                parts.append(part["text"])
            else:
                raise ApiError(400, f"'{where}[{i}].type' {part.get('type')!r} is not "
                               "supported: mol takes text parts", param=f"{where}[{i}].type")
        return "".join(parts)
    raise ApiError(400, f"'{where}' must be a string, an array of parts or null, got "
                   f"{json_kind(content)}", param=where)
