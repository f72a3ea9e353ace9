"""Pure helpers of the MCP client: tool naming, definition pins, result text.

Nothing here imports ``mcp``: the SDK's objects are read by attribute (duck
typing), so these helpers stay cheap to import and easy to test.

Naming. A server tool is exposed as ``mcp__<server>__<tool>``. That *clean*
form is used only when it decodes to exactly one (server, tool) pair: the
server name has no ``__`` and does not end with ``_`` (so the first ``__``
after ``mcp__`` is the separator), the tool name uses only the characters
engines accept, does not end like a hash suffix, is not ``read_resource``
(reserved for mol's resource tool), and the whole name fits in 64 characters.
Anything else becomes ``mcp__<sanitized, truncated>_<10 hex digits>``, the
hex being a digest of the exact (server, tool) pair. Clean names never end in
``_`` + 10 hex digits, so a clean name never equals a hashed one, and two
clean names never collide: distinct pairs get distinct names by construction.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Iterable
from typing import Any

MAX_NAME = 64
"""Longest function name engines accept."""

RESOURCE_TOOL = "read_resource"
"""Tool-name part of mol's per-server resource reader (``mcp__<server>__read_resource``)."""

_VALID = re.compile(r"^[A-Za-z0-9_-]+$")
_INVALID_CHAR = re.compile(r"[^A-Za-z0-9_-]")
_HASH_SUFFIX = re.compile(r"_[0-9a-f]{10}$")
_HASH_LEN = 10


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:_HASH_LEN]


def _clean_server(server: str) -> bool:
    return bool(_VALID.match(server)) and "__" not in server and not server.endswith("_")


def qualified_name(server: str, tool: str) -> str:
    """The name a model sees for ``tool`` of ``server`` (see the module docstring)."""
    name = f"mcp__{server}__{tool}"
    clean = (_clean_server(server) and bool(_VALID.match(tool)) and tool != RESOURCE_TOOL
             and not _HASH_SUFFIX.search(tool) and len(name) <= MAX_NAME)
    return name if clean else _hashed(name, "tool", server, tool)


def resource_tool_name(server: str) -> str:
    """The name of mol's tool that reads resources of ``server``."""
    name = f"mcp__{server}__{RESOURCE_TOOL}"
    if _clean_server(server) and len(name) <= MAX_NAME:
        return name
    return _hashed(name, "resource", server)


def _hashed(name: str, *key: str) -> str:
    suffix = "_" + _digest(*key)
    base = _INVALID_CHAR.sub("_", name)[: MAX_NAME - len(suffix)]
    return base + suffix


def filter_tools(names: Iterable[str], enabled: list[str] | None, disabled: list[str]) -> set[str]:
    """The tool names a server exposes: in ``enabled`` (when set) and not in ``disabled``."""
    kept = {n for n in names if enabled is None or n in enabled}
    return kept - set(disabled)


def definition_digest(tool: Any) -> str:
    """``sha256:`` digest of what a model is told about a tool (the pin).

    Covers the name, title, description, input and output schemas and
    annotations: a server changing any of them mid-session changes the digest.
    """
    form = {
        "name": tool.name,
        "title": getattr(tool, "title", None),
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "outputSchema": getattr(tool, "output_schema", None),
        "annotations": _dump(getattr(tool, "annotations", None)),
    }
    text = json.dumps(form, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _dump(value: Any) -> Any:
    if value is None or isinstance(value, dict):
        return value
    dump = getattr(value, "model_dump", None)
    return dump(mode="json", exclude_none=True) if dump else str(value)


def cap_text(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, head and tail kept, with a marker."""
    if len(text) <= limit:
        return text
    tail = limit // 4
    head = limit - tail
    dropped = len(text) - head - tail
    return f"{text[:head]}\n[... mol dropped {dropped} characters of this result ...]\n{text[-tail:]}"


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data)


def describe_block(block: Any) -> str:
    """Text a model reads for one MCP content block (text as is, others described)."""
    kind = getattr(block, "type", "unknown")
    if kind == "text":
        return block.text
    if kind in ("image", "audio"):
        return f"[{kind}: {block.mime_type}, {_decoded_size(block.data)} bytes]"
    if kind == "resource_link":
        mime = f", {block.mime_type}" if getattr(block, "mime_type", None) else ""
        return f"[resource link: {block.uri} ({block.name}{mime})]"
    if kind == "resource":
        return describe_resource(block.resource)
    return f"[{kind} content]"


def describe_resource(contents: Any) -> str:
    """Text of one resource's contents (text as is, blobs described)."""
    text = getattr(contents, "text", None)
    if text is not None:
        return text
    mime = getattr(contents, "mime_type", None) or "application/octet-stream"
    return f"[resource {contents.uri}: {mime}, {_decoded_size(contents.blob)} bytes]"


def result_text(content: list[Any], structured: Any, limit: int) -> str:
    """The text of a ``tools/call`` result: its content blocks, else its structured content."""
    parts = [describe_block(block) for block in content]
    if not parts and structured is not None:
        parts = [json.dumps(structured, ensure_ascii=False, default=str)]
    return cap_text("\n".join(parts), limit)


def backoff_delay(failures: int) -> float:
    """Seconds to wait before restarting a server that died ``failures`` times in a row."""
    if failures <= 1:
        return 0.0
    return min(30.0, 2.0 ** (failures - 2))
