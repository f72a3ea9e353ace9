"""Admission of turns: a fixed number of slots, a bounded FIFO queue in front of them.

A request takes a slot when one is free and nobody waits; otherwise it joins the queue and
takes the next slot freed, in arrival order. A full queue, or a wait longer than ``wait``
seconds, is a 429 with ``Retry-After``: load queues instead of failing, and only what
exceeds the queue is refused. A slot is handed straight to the first waiter when it is
freed, so a burst of arrivals can never overtake the queue.
"""

from __future__ import annotations

import math
from collections import deque

import anyio

from mol.server.http.errors import ApiError


class Admission:
    """``slots`` turns at once, at most ``queue`` more waiting, each at most ``wait`` seconds."""

    def __init__(self, slots: int, queue: int, wait: float) -> None:
        self.slots, self.queue, self.wait = slots, queue, wait
        self.free = slots
        self._waiters: deque[anyio.Event] = deque()

    @property
    def waiting(self) -> int:
        """Requests in the queue."""
        return len(self._waiters)

    @property
    def running(self) -> int:
        """Slots taken."""
        return self.slots - self.free

    async def enter(self) -> None:
        """Take a slot, waiting in line for one if need be; 429 when the line is full or
        the wait runs out."""
        if self.free and not self._waiters:
            self.free -= 1
            return
        if len(self._waiters) >= self.queue:
            raise self._refused(f"the server is running {self.slots} turns and "
                                f"{len(self._waiters)} more wait, its limits")
        granted = anyio.Event()
        self._waiters.append(granted)
        try:
            with anyio.fail_after(self.wait):
                await granted.wait()
        except BaseException as exc:
            if granted.is_set():  # the slot arrived as the wait ended: pass it on
                self.leave()
            else:
                self._waiters.remove(granted)
            if isinstance(exc, TimeoutError):
                raise self._refused(f"no turn slot came free within {self.wait:g} s") from None
            raise

    def leave(self) -> None:
        """Give a slot back: to the first in line, or to the pool."""
        if self._waiters:
            self._waiters.popleft().set()
        else:
            self.free += 1

    def _refused(self, why: str) -> ApiError:
        retry = max(1, min(30, math.ceil(self.wait / 4))) if self._waiters else 1
        return ApiError(429, f"{why}; retry shortly", code="too_many_turns",
                        headers={"Retry-After": str(retry)})
