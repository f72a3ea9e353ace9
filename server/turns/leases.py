"""Which conversations this server replica's turns hold, and how long.

A turn holds its conversation twice: a lock in this process, so turns of one replica
on one conversation run one after another (a quick follow-up waits for the summary
hop instead of missing it), and the store's **lease**, so a turn of the same
conversation on another replica sharing the store is refused (after ``BUSY_WAIT``): 409
``conversation_busy`` with ``Retry-After`` (the official ``openai`` client retries it by
itself). Leases of turns in flight are renewed in the background every third of their
life; a replica that dies stops renewing, and the first replica to take a lease over
marks the dead holder's turn interrupted (``SessionStore.acquire``).
"""

from __future__ import annotations

import logging

import anyio

from mol.core.errors import SessionBusy, SessionError
from mol.runtime import LEASE_SEC, SessionStore, new_owner

log = logging.getLogger("mol.server")

BUSY_WAIT = 1.0
"""Seconds a turn waits for a conversation another replica holds before its 409."""


class Leases:
    """This replica's locks and store leases on conversations (one owner per replica)."""

    def __init__(self, store: SessionStore, ttl: float = LEASE_SEC) -> None:
        self.store = store
        self.ttl = ttl
        self.owner = new_owner()
        self._locks: dict[str, anyio.Lock] = {}
        self._held: set[str] = set()

    async def take(self, session_id: str) -> None:
        """Hold ``session_id``: wait for this replica's turn on it, then take the store's
        lease; ``SessionBusy`` when another replica's turn holds it (after ``BUSY_WAIT``)."""
        lock = self._locks.setdefault(session_id, anyio.Lock())
        await lock.acquire()
        try:
            interrupted = await self._acquire(session_id)
        except BaseException:
            self._unlock(session_id)
            raise
        self._held.add(session_id)
        for index in interrupted:
            log.warning("session %s: took over from a replica that stopped; its turn %d "
                        "is marked interrupted", session_id, index)

    async def _acquire(self, session_id: str) -> list[int]:
        # A lease held elsewhere is most often a turn's summary hop about to end: wait a
        # moment before refusing.
        deadline = anyio.current_time() + BUSY_WAIT
        while True:
            try:
                return await self.store.acquire(session_id, self.owner, self.ttl)
            except SessionBusy:
                if anyio.current_time() >= deadline:
                    raise
            await anyio.sleep(0.05)

    async def give(self, session_id: str) -> None:
        """Give ``session_id`` back: the store's lease first (so this replica's next turn
        on it cannot lose the lease it just took), then the lock."""
        if session_id not in self._held:
            return
        self._held.discard(session_id)
        try:
            with anyio.CancelScope(shield=True):
                await self.store.release(session_id, self.owner)
        except SessionError as exc:  # it expires on its own
            log.warning("session %s: could not give its lease back: %s", session_id, exc)
        finally:
            self._unlock(session_id)

    async def renew_forever(self) -> None:
        """Renew the leases of turns in flight every third of their life (a task of the
        runner's group, cancelled with it)."""
        while True:
            await anyio.sleep(self.ttl / 3)
            for session_id in list(self._held):
                try:
                    kept = await self.store.renew(session_id, self.owner, self.ttl)
                except SessionError as exc:
                    log.warning("session %s: could not renew its lease: %s", session_id, exc)
                    continue
                if not kept and session_id in self._held:
                    # Another replica took it over: this turn's next save is refused.
                    log.warning("session %s: its lease was lost to another replica",
                                session_id)

    def _unlock(self, session_id: str) -> None:
        lock = self._locks.get(session_id)
        if lock is None:
            return
        lock.release()
        if not lock.locked() and lock.statistics().tasks_waiting == 0:
            del self._locks[session_id]
