"""The text a model reads of an MCP result: content blocks described, capped in size.

Nothing here imports ``mcp``: the SDK's objects are read by attribute.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any


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
    """The text of a ``tools/call`` result: its content blocks, else its structured content.

    Blocks are described only until the text is long enough to be capped (twice
    ``limit``) plus the last blocks for the tail, so a result of very many blocks
    costs no more than a long one.
    """
    parts: list[str] = []
    size = 0
    for index, block in enumerate(content):
        if size > 2 * limit:
            tail = [describe_block(b) for b in content[max(index, len(content) - 16):]]
            skipped = max(0, len(content) - 16 - index)
            if skipped:
                parts.append(f"[... mol skipped {skipped} content blocks ...]")
            parts += tail
            break
        parts.append(describe_block(block))
        size += len(parts[-1]) + 1
    if not parts and structured is not None:
        parts = [json.dumps(structured, ensure_ascii=False, default=str)]
    return cap_text("\n".join(parts), limit)
