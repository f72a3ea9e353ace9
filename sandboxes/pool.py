"""Warm pools: sandboxes started ahead of time, so acquiring one costs about a millisecond.

::

    async with SandboxPool(config) as pool:        # size: config.pool_size
        async with await pool.acquire() as sandbox:
            ...

A pool keeps ``size`` sandboxes ready for one image and one set of settings
and refills in the background as they are taken. While a pool is open,
``open_sandbox`` with the same settings takes from it. A taken sandbox belongs
to its taker (removed when its ``async with`` ends); the ones still waiting
are removed when the pool closes. Pool containers carry the session label
``pool``.
"""

from __future__ import annotations

import json
import logging

import anyio
from anyio.abc import TaskGroup

from mol.hcp.schema import SandboxConfig
from mol.sandboxes.sandbox import Sandbox

log = logging.getLogger(__name__)

_active: dict[str, SandboxPool] = {}


def pool_key(config: SandboxConfig) -> str:
    """Sandboxes are interchangeable when every setting but the pool size is equal."""
    return json.dumps(config.model_dump(exclude={"pool_size"}), sort_keys=True)


def active_pool(config: SandboxConfig) -> SandboxPool | None:
    """The open pool serving ``config``'s settings, if any."""
    return _active.get(pool_key(config))


class SandboxPool:
    """Ready sandboxes for one configuration, refilled in the background."""

    def __init__(self, config: SandboxConfig, size: int | None = None) -> None:
        self.config = config
        self.size = config.pool_size if size is None else size
        self._ready: list[Sandbox] = []
        self._wanted = anyio.Event()
        self._changed = anyio.Event()
        self._group: TaskGroup | None = None
        self.errors = 0
        """Sandboxes that failed to start while refilling."""

    async def __aenter__(self) -> SandboxPool:
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        self._group.start_soon(self._refill)
        _active.setdefault(pool_key(self.config), self)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if _active.get(pool_key(self.config)) is self:
            del _active[pool_key(self.config)]
        assert self._group is not None
        self._group.cancel_scope.cancel()
        await self._group.__aexit__(None, None, None)
        ready, self._ready = self._ready, []
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as group:
                for sandbox in ready:
                    group.start_soon(sandbox.close)

    @property
    def ready(self) -> int:
        """Sandboxes waiting to be taken."""
        return len(self._ready)

    async def wait_ready(self, count: int | None = None) -> None:
        """Wait until ``count`` (default: all) sandboxes are ready."""
        count = self.size if count is None else count
        while len(self._ready) < count:
            self._changed = anyio.Event()
            await self._changed.wait()

    async def acquire(self) -> Sandbox:
        """A started sandbox: a ready one at once, else a fresh one (cold start)."""
        self._wanted.set()
        if self._ready:
            return self._ready.pop()
        sandbox = Sandbox(self.config, session_id="pool")
        await sandbox.start()
        return sandbox

    async def _refill(self) -> None:
        while True:
            while len(self._ready) < self.size:
                sandbox = Sandbox(self.config, session_id="pool")
                try:
                    await sandbox.start()
                except Exception as exc:  # logged and retried later: a pool never crashes
                    self.errors += 1
                    log.warning("warm pool: a sandbox failed to start: %s", exc)
                    await anyio.sleep(min(30, 2 ** self.errors))
                    continue
                self._ready.append(sandbox)
                self._changed.set()
            self._wanted = anyio.Event()
            await self._wanted.wait()
