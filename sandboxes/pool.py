"""Warm pools: sandboxes started ahead of time, so acquiring one costs about a millisecond.

::

    async with SandboxPool(config) as pool:        # size: config.pool_size
        async with await pool.acquire() as sandbox:
            ...

A pool keeps ``size`` sandboxes ready for one image and one set of settings
and refills in the background as they are taken. Its owner hands it in:
``open_runtime`` opens one when ``[sandbox] pool_size`` is above 0, and every
session's sandbox is then taken from it (``open_sandbox(..., pool=pool)``).
A taken sandbox belongs to its taker (removed when its ``async with`` ends) and is
renamed after its session (``mol-s-<session>-…``); the ones still waiting
(``mol-pool-…``, label ``org.mol.sandbox=pool``) are removed when the pool closes.
"""

from __future__ import annotations

import json
import logging
from contextlib import AsyncExitStack

import anyio
from anyio.abc import TaskGroup

from mol.hcp.schema import SandboxConfig
from mol.sandboxes.sandbox import Sandbox

log = logging.getLogger(__name__)

def pool_key(config: SandboxConfig) -> str:
    """Sandboxes are interchangeable when every setting of the container is equal (the pool
    size and which tools an editor serves instead are none)."""
    return json.dumps(config.model_dump(exclude={"pool_size", "acp_client"}), sort_keys=True)


class SandboxPool:
    """Ready sandboxes for one configuration, refilled in the background."""

    def __init__(self, config: SandboxConfig, size: int | None = None) -> None:
        self.config = config
        self.size = config.pool_size if size is None else size
        self._ready: list[Sandbox] = []
        self._wanted = anyio.Event()
        self._changed = anyio.Event()
        self._group: TaskGroup | None = None
        self._stack = AsyncExitStack()
        self.errors = 0
        """Sandboxes that failed to start while refilling."""

    async def __aenter__(self) -> SandboxPool:
        async with AsyncExitStack() as stack:
            stack.push_async_callback(self._remove_ready)  # after the refill task ended
            self._group = await stack.enter_async_context(anyio.create_task_group())
            self._group.start_soon(self._refill)
            self._stack = stack.pop_all()
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._group is not None
        self._group.cancel_scope.cancel()
        await self._stack.aclose()

    def serves(self, config: SandboxConfig) -> bool:
        """Whether this pool's sandboxes fit ``config`` (equal in all but the pool size)."""
        return pool_key(config) == pool_key(self.config)

    async def _remove_ready(self) -> None:
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

    async def acquire(self, session_id: str = "") -> Sandbox:
        """A started sandbox for ``session_id``: a ready one (renamed after the session, a
        few milliseconds), else a fresh one (cold start)."""
        self._wanted.set()
        if self._ready:
            sandbox = self._ready.pop()
            try:
                await sandbox.assign(session_id)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await sandbox.close()
                raise
            return sandbox
        sandbox = Sandbox(self.config, session_id=session_id)
        await sandbox.start()
        return sandbox

    async def _refill(self) -> None:
        while True:
            while len(self._ready) < self.size:
                sandbox = Sandbox(self.config, session_id=None)
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
