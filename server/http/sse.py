"""Server-sent events: one event's bytes, and the comment a quiet stream sends."""

from __future__ import annotations

import json
from typing import Any

KEEPALIVE_COMMENT = b": keep-alive\n\n"
"""What a quiet stream sends every ``keepalive`` seconds (an SSE comment: clients skip it)."""


def sse(data: dict[str, Any] | str, event: str | None = None) -> bytes:
    """One server-sent event (``data: {...}``, optionally with an ``event:`` line)."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()
