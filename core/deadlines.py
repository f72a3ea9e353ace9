"""Deadlines that stand still while someone outside the runtime (a person at the terminal,
an API client) takes their time to answer."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import anyio


@contextmanager
def paused(scope: anyio.CancelScope | None) -> Iterator[None]:
    """Stop ``scope``'s deadline for the block; after it, the deadline is as far away as it
    was before. A scope without a deadline (or ``None``) is left alone."""
    if scope is None or scope.deadline == math.inf:
        yield
        return
    left = scope.deadline - anyio.current_time()
    scope.deadline = math.inf
    try:
        yield
    finally:
        scope.deadline = anyio.current_time() + left
