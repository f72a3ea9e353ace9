"""Bounds on what one MCP message may cost mol, applied before the SDK sees it.

A hostile server can send a message that is cheap to write and dear to read:
hundreds of thousands of empty content blocks, a deep nest of lists, a
gigantic log payload. ``parse`` runs in a worker thread (never on the event
loop): it counts the JSON containers of a line before decoding it (bytes are
cheap to scan, Python objects are not), decodes it, and shrinks what mol
would never show anyway (content blocks past ``MAX_BLOCKS``, tools past
``MAX_TOOLS``, text past ``MAX_TEXT_CHARS``, log data past a short preview),
so that the SDK's own validation on the event loop stays small. A message it
refuses raises ``Refused``, naming the request it answered when it can find
one, so that only that request fails. Nothing here imports ``mcp``.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_CONTAINERS = 50_000
"""Most JSON objects and arrays in one message."""
MAX_BLOCKS = 512
"""Content blocks of one result kept (a marker block says how many were dropped)."""
MAX_TOOLS = 2_000
"""Tools of one ``tools/list`` page kept."""
MAX_TEXT_CHARS = 1_000_000
"""Characters of text kept across the content blocks of one result."""
MAX_LOG_CHARS = 2_000
"""Characters of a log notification's data kept."""

_ID_HEAD = re.compile(rb'^\s*\{(?:\s*"jsonrpc"\s*:\s*"2\.0"\s*,)?\s*"id"\s*:\s*(-?\d{1,18}|"[^"\\]{0,200}")')
_ID_TAIL = re.compile(rb'"id"\s*:\s*(-?\d{1,18}|"[^"\\]{0,200}")\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*$')


class Refused(Exception):
    """A message mol will not decode; ``request_id`` is the request it answered, if known."""

    def __init__(self, reason: str, request_id: int | str | None = None) -> None:
        super().__init__(reason)
        self.request_id = request_id


def request_id(head: bytes, tail: bytes) -> int | str | None:
    """The id of the JSON-RPC response whose text begins with ``head`` and ends with
    ``tail``, when either end names it (SDKs write ``id`` first or last)."""
    match = _ID_HEAD.search(head) or _ID_TAIL.search(tail)
    if match is None:
        return None
    try:
        return json.loads(match.group(1))
    except ValueError:
        return None


def parse(line: bytes) -> Any:
    """The decoded, shrunk message of one line; ``Refused`` or ``ValueError`` when it is
    too costly or not JSON."""
    containers = line.count(b"{") + line.count(b"[")
    if containers > MAX_CONTAINERS:
        raise Refused(f"a message of {containers} JSON objects and arrays (mol reads at most "
                      f"{MAX_CONTAINERS})", request_id(line[:4096], line[-4096:]))
    try:
        message = json.loads(line)
    except RecursionError:
        raise Refused("a message nested too deeply", request_id(line[:4096], line[-4096:])) from None
    if isinstance(message, dict):
        shrink(message)
    return message


def shrink(message: dict[str, Any]) -> None:
    """Cut, in place, the parts of a message mol would never show."""
    result = message.get("result")
    if isinstance(result, dict):
        content = result.get("content")
        if isinstance(content, list):
            result["content"] = _blocks(content)
        tools = result.get("tools")
        if isinstance(tools, list) and len(tools) > MAX_TOOLS:
            del tools[MAX_TOOLS:]
    params = message.get("params")
    if message.get("method") == "notifications/message" and isinstance(params, dict):
        data = params.get("data")
        if not isinstance(data, str) or len(data) > MAX_LOG_CHARS:
            text = data if isinstance(data, str) else json.dumps(data, default=str)[:MAX_LOG_CHARS + 1]
            params["data"] = text if len(text) <= MAX_LOG_CHARS else text[:MAX_LOG_CHARS] + "..."


def _blocks(content: list[Any]) -> list[Any]:
    kept: list[Any] = []
    budget = MAX_TEXT_CHARS
    dropped = max(0, len(content) - MAX_BLOCKS)
    for block in content[:MAX_BLOCKS]:
        text = block.get("text") if isinstance(block, dict) else None
        if isinstance(text, str):
            if budget <= 0:
                dropped += 1
                continue
            if len(text) > budget:
                block["text"] = text[:budget]
            budget -= len(text)
        kept.append(block)
    if dropped:
        kept.append({"type": "text", "text": f"[... mol dropped {dropped} more content blocks "
                                             "of this result ...]"})
    return kept
