"""How MCP tools are named for a model, and how their definitions are pinned.

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
