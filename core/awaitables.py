"""Callables that may be sync or async: plugin hooks, tool validators and turn observers
may return an awaitable, which the caller then awaits."""

from __future__ import annotations

import inspect
from typing import Any


async def maybe_await(value: Any) -> Any:
    """Await ``value`` if it is awaitable (plugin hooks may return awaitables)."""
    return await value if inspect.isawaitable(value) else value
