"""``mol acp``'s main loop: one editor served over stdio until it closes its end.

Everything is opened once for the process and closed on the way out, in this order: the
session store, the runtime (engine, plugins, the artifact's MCP servers, the sandbox
pool), the task group of the sessions' keepers. When the editor closes stdin (or the
process is told to stop), what is in flight is answered (a prompt running is cancelled and
stored as interrupted), the sessions close (their leases given back), then the connection.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio

from mol.acpagent import sdk
from mol.acpagent.agent import Agent
from mol.acpagent.wire import Wire

log = logging.getLogger("mol.acp")

CLOSE_SEC = 30.0
"""How long closing the sessions and the connection may take at the end."""


async def serve(artifact: Any, *, reading: int, writing: int,
                engine_url: str | None = None) -> None:
    """Serve the editor on the descriptors ``reading`` and ``writing`` (``claim_stdio``'s)
    until it closes its end."""
    from mol.runtime import new_owner, open_runtime, open_store, store_url_for

    wire = Wire(reading, writing)
    try:
        async with (open_store(store_url_for(artifact)) as store,
                    open_runtime(artifact, engine_url=engine_url) as runtime,
                    anyio.create_task_group() as group):
            agent = Agent(artifact, runtime, store, group, wire, new_owner())
            wire.on_answer = agent.answered
            connection = sdk.connect(agent.handle, wire)
            agent.peer = sdk.Peer(connection)
            log.info("serving %s (%s) over stdio; sessions in %s", artifact.name,
                     artifact.digest[:19], store.location)
            try:
                await connection.main_loop()
            finally:
                with anyio.move_on_after(CLOSE_SEC, shield=True):
                    await agent.settle()
                    await agent.close()
                    await connection.close()
    finally:
        await wire.close()
