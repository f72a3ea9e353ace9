"""The composition root: everything a conversation needs, opened and closed together.

``open_runtime`` removes sandboxes and MCP server processes orphaned by dead
runtimes (in the background; a caller that did so already, like ``mol eval run`` once
per run, passes ``collect_orphans=False``), starts the embedded engine when the artifact asks for it and
none answers, loads the plugins, starts the MCP servers the artifact declares
(in the background), opens the warm sandbox pool when ``[sandbox] pool_size``
asks for one, and yields a ready ``Harness``.
Everything it starts is owned by its ``async with`` and ends with it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio

from mol.core.errors import exception_leaves
from mol.hcp.loader import Artifact
from mol.runtime.harness import Harness
from mol.runtime.views import Conversation

log = logging.getLogger("mol.runtime")


async def _collect_orphan_sandboxes() -> None:
    """Remove sandboxes left by runtimes that died (e.g. SIGKILL); never fails a start."""
    from mol.core.errors import SandboxError
    from mol.sandboxes.owner import gc_orphans

    try:
        with anyio.move_on_after(30):
            removed = await gc_orphans()
            if removed:
                log.info("removed %d orphaned sandbox container(s)", len(removed))
    except SandboxError as exc:  # no Docker engine here: nothing to collect
        log.debug("sandbox gc skipped: %s", exc)


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
    elicit: Any = None,
    resources: Any = None,
    tool_wrapper: Any = None,
    call_ids: Any = None,
    collect_orphans: bool = True,
) -> AsyncIterator[Harness]:
    """A ready harness for ``artifact``; closes every resource it opened on exit.

    What the caller's block raises comes out as raised, not wrapped in the exception
    groups of the background task groups. ``elicit`` answers MCP servers' requests for
    input (``ToolContext.elicit``'s shape); without it they are declined. ``resources``
    (a ``Resources``) may come pre-seeded, e.g. with the sandbox an eval episode owns;
    ``tool_wrapper`` and ``call_ids`` go to the ``Harness``. ``collect_orphans=False``
    skips the orphan collection (a Docker listing and a scan of ``/proc``).
    """
    extra = {"resources": resources, "tool_wrapper": tool_wrapper, "call_ids": call_ids}
    try:
        async with _opened(artifact, engine_url, conversation, approve, checkpoint, plugins,
                           engine, elicit, extra, collect_orphans) as harness:
            yield harness
    except BaseExceptionGroup as group:
        leaves = exception_leaves(group)
        if len(leaves) != 1:
            raise
        leaf = leaves[0]
        leaf.__suppress_context__ = True  # the group is ours, not the caller's concern
        raise leaf  # noqa: B904 - keeps the leaf's own cause


@asynccontextmanager
async def _opened(artifact: Artifact, engine_url: str | None, conversation: Any,
                  approve: Any, checkpoint: Any, plugins: Any,
                  engine: Any, elicit: Any, extra: dict[str, Any],
                  collect_orphans: bool = True) -> AsyncIterator[Harness]:
    async with AsyncExitStack() as stack:
        background = await stack.enter_async_context(anyio.create_task_group())
        if collect_orphans:
            background.start_soon(_collect_orphan_sandboxes)
        if plugins is None:
            from mol.plugins.manager import PluginManager

            plugins = PluginManager.for_artifact(artifact)
        if engine is None and artifact.doc.engine.kind == "local":
            from mol.runtime.llamacpp.supervisor import ensure_local_engine

            # Start the embedded engine on demand (and stop it with the runtime) when
            # nothing answers at the artifact's address yet.
            await stack.enter_async_context(ensure_local_engine(
                artifact, api_base=engine_url or os.environ.get("MOL_ENGINE_URL")))
        toolsets = []
        if any(server.enabled for server in artifact.doc.mcp_servers.values()):
            from mol.runtime.mcp import MCPManager

            # Servers start in the background: the first turn waits only for the
            # servers its adapter sees. The manager also ends servers a dead runtime left.
            toolsets.append(await stack.enter_async_context(MCPManager(artifact, elicit=elicit)))
        elif collect_orphans:
            from mol.runtime.mcp.server import collect_orphan_servers

            background.start_soon(collect_orphan_servers)
        pool = None
        if artifact.doc.sandbox.pool_size > 0:
            from mol.sandboxes.pool import SandboxPool

            # Warm sandboxes fill in the background; a session takes one on first use.
            pool = await stack.enter_async_context(SandboxPool(artifact.doc.sandbox))
        harness = Harness(artifact, engine=engine, engine_url=engine_url, plugins=plugins,
                          toolsets=toolsets, conversation=conversation, approve=approve,
                          checkpoint=checkpoint, sandbox_pool=pool, **extra)
        for toolset in toolsets:
            toolset.engine = harness.engine  # MCP sampling answers through the turn's engine
        await stack.enter_async_context(harness)
        yield harness
