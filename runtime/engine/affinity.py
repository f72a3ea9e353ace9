"""What an engine request carries besides its body: the conversation it belongs to (for an
affinity header) and the answer hop's thinking switch.

``engine.affinity_header`` names a header every engine request of a conversation carries
with the same value, so that a gateway in front of several engine replicas (SGLang's model
gateway reads ``X-SMG-Routing-Key``) sends them all to the replica holding that
conversation's prefix cache. The value is the conversation's id, known to whoever runs the
turn: ``conversation_scope`` sets it for the requests made inside it (and the tasks they
start), and the engine client reads it (``current``).

A client's reasoning effort reaches the answer hop as the parameter ``THINKING`` (True or
False), which the engine client turns into the artifact's ``engine.thinking_on`` or
``engine.thinking_off`` fields (``thinking_fields``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

THINKING = "thinking"
"""The answer-hop parameter carrying the client's thinking switch (never sent as such)."""
NO_THINKING = ("none", "minimal")
"""Reasoning efforts that switch thinking off; any other effort switches it on."""

_CONVERSATION: ContextVar[str | None] = ContextVar("mol_engine_conversation", default=None)


@contextmanager
def conversation_scope(conversation_id: str) -> Iterator[None]:
    """Engine requests made inside belong to ``conversation_id``."""
    token = _CONVERSATION.set(conversation_id)
    try:
        yield
    finally:
        _CONVERSATION.reset(token)


def current() -> str | None:
    """The conversation the engine request being made belongs to, if known."""
    return _CONVERSATION.get()


def thinks(effort: str) -> bool:
    """Whether a client's reasoning effort switches the answer hop's thinking on."""
    return effort not in NO_THINKING


def thinking_fields(switch: Any, on: Mapping[str, Any], off: Mapping[str, Any]
                    ) -> dict[str, Any]:
    """The body fields for a ``THINKING`` parameter's value (none when it is unset)."""
    if switch is None:
        return {}
    return dict(on if switch else off)


def effort_params(effort: str) -> dict[str, Any]:
    """The answer-hop parameter a client's reasoning effort sets: the thinking switch."""
    return {THINKING: thinks(effort)}
