"""The composition root: everything a conversation needs, opened and closed together.

``open_runtime`` loads the plugins, starts what the artifact declares (MCP
servers, the local engine when asked for), and yields a ready ``Harness``.
Everything it starts is owned by its ``async with`` and ends with it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from mol.hcp.loader import Artifact
from mol.runtime.harness import Harness
from mol.runtime.views import Conversation


@asynccontextmanager
async def open_runtime(
    artifact: Artifact,
    *,
    engine_url: str | None = None,
    conversation: Conversation | None = None,
    approve: Any = None,
    checkpoint: Any = None,
    plugins: Any = None,
    engine: Any = None,
) -> AsyncIterator[Harness]:
    """A ready harness for ``artifact``; closes every resource it opened on exit."""
    async with AsyncExitStack() as stack:
        if plugins is None:
            from mol.plugins.manager import PluginManager

            plugins = PluginManager(artifact.doc.plugins.load)
        toolsets = []
        if any(server.enabled for server in artifact.doc.mcp_servers.values()):
            from mol.runtime.mcp_manager import MCPManager

            # Servers start in the background: the first turn waits only for the
            # servers its adapter sees.
            toolsets.append(await stack.enter_async_context(MCPManager(artifact)))
        harness = Harness(artifact, engine=engine, engine_url=engine_url, plugins=plugins,
                          toolsets=toolsets, conversation=conversation, approve=approve,
                          checkpoint=checkpoint)
        await stack.enter_async_context(harness)
        yield harness
