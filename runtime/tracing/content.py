"""Message text as the GenAI conventions carry it, for spans that capture content.

``gen_ai.input.messages`` and ``gen_ai.output.messages`` hold JSON: a list of messages, each
``{"role", "parts": [...]}`` with ``text`` parts, ``tool_call`` parts (``id``, ``name``,
``arguments``) and ``tool_call_response`` parts (``id``, ``response``); an output message
adds its ``finish_reason``. mol's messages are in the Chat Completions shape the engine is
sent; this turns them into that form. Only ever called when content capture is on.
"""

from __future__ import annotations

import json
from typing import Any


def dumps(value: Any) -> str:
    """Compact JSON, as span attributes hold structured values."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def text_of(content: Any) -> str:
    """A message's content as text (the text parts of a list of parts, joined)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content
                       if isinstance(part, dict) and part.get("type") == "text")
    return str(content)


def _arguments(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def message(entry: dict[str, Any]) -> dict[str, Any]:
    """One Chat Completions message in the conventions' form."""
    role = entry.get("role", "user")
    parts: list[dict[str, Any]] = []
    if role == "tool":
        return {"role": "tool", "parts": [{"type": "tool_call_response",
                                           "id": entry.get("tool_call_id"),
                                           "response": text_of(entry.get("content"))}]}
    text = text_of(entry.get("content"))
    if text:
        parts.append({"type": "text", "content": text})
    if entry.get("reasoning_content"):
        parts.insert(0, {"type": "reasoning", "content": entry["reasoning_content"]})
    for call in entry.get("tool_calls") or []:
        function = call.get("function") or {}
        parts.append({"type": "tool_call", "id": call.get("id"), "name": function.get("name"),
                      "arguments": _arguments(function.get("arguments") or "")})
    return {"role": role, "parts": parts}


def input_messages(messages: list[dict[str, Any]]) -> str:
    """``gen_ai.input.messages`` for a request's messages."""
    return dumps([message(entry) for entry in messages])


def user_text(text: str) -> str:
    """``gen_ai.input.messages`` for one user turn."""
    return dumps([{"role": "user", "parts": [{"type": "text", "content": text}]}])


def output_message(content: str, tool_calls: list[Any], finish_reason: str | None,
                   reasoning: str = "") -> str:
    """``gen_ai.output.messages`` for a reply (``tool_calls``: ``ToolCall``s)."""
    parts: list[dict[str, Any]] = []
    if reasoning:
        parts.append({"type": "reasoning", "content": reasoning})
    if content:
        parts.append({"type": "text", "content": content})
    for call in tool_calls:
        parts.append({"type": "tool_call", "id": call.id, "name": call.name,
                      "arguments": _arguments(call.arguments)})
    return dumps([{"role": "assistant", "parts": parts,
                   "finish_reason": finish_reason or "stop"}])


def tool_definitions(tools: list[dict[str, Any]] | None) -> str:
    """``gen_ai.tool.definitions`` for a request's ``tools``."""
    return dumps([tool.get("function", tool) for tool in tools or []])
