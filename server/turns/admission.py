"""Admission of turns: a fixed number of slots, a bounded FIFO queue in front of them.

A request takes a slot when one is free and nobody waits; otherwise it joins the queue and
takes the next slot freed, in arrival order. A full queue, or a wait longer than ``wait``
seconds, is ``Overloaded`` (a 429 with ``Retry-After``): load queues instead of failing,
and only what exceeds the queue is refused. A slot is handed straight to the first waiter
when it is freed, so a burst of arrivals can never overtake the queue.

A turn gives its slot back as soon as its reply is complete (``replied``), for a
background slot (as many) under which its summary hop and last checkpoints run: they
never hold up new turns, and a shortage of them pushes back on admission instead of
piling up.
"""

from __future__ import annotations

import math
from collections import deque

import anyio

from mol.core.errors import Overloaded


class Admission:
    """``slots`` turns at once, at most ``queue`` more waiting, each at most ``wait`` seconds."""

    def __init__(self, slots: int, queue: int, wait: float) -> None:
        self.slots, self.queue, self.wait = slots, queue, wait
        self.free = slots
        self._waiters: deque[anyio.Event] = deque()
        self.background = anyio.CapacityLimiter(slots)
        """Slots of turns whose reply is complete (their summary hop, last checkpoints)."""

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
        the wait runs out (``Overloaded``)."""
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

    def _refused(self, why: str) -> Overloaded:
        retry = max(1, min(30, math.ceil(self.wait / 4))) if self._waiters else 1
        return Overloaded(f"{why}; retry shortly", retry_after=retry)

    async def replied(self, owner: object) -> None:
        """``owner``'s reply is complete: trade its turn slot for a background slot (given
        back by ``finished``)."""
        await self.background.acquire_on_behalf_of(owner)
        self.leave()

    def finished(self, owner: object) -> None:
        """``owner``'s turn ended after its reply: give its background slot back."""
        self.background.release_on_behalf_of(owner)
