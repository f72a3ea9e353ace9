"""The composition root: everything a runtime needs, opened and closed together.

``open_runtime`` removes sandboxes and MCP server processes orphaned by dead
runtimes (in the background; a caller that did so already, like ``mol eval run`` once
per run, passes ``collect_orphans=False``), starts the embedded engine when the artifact
asks for it and none answers, loads the plugins, starts the MCP servers the artifact
declares (in the background), opens the warm sandbox pool when ``[sandbox] pool_size``
asks for one, opens the tracer when ``[telemetry]`` or ``OTEL_*`` ask for one, and yields
a ready ``Runtime``; its ``session()`` runs a conversation.
Everything it starts is owned by its ``async with`` and ends with it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from typing import Any

import anyio

from mol.core.errors import SandboxError, exception_leaves
from mol.hcp.loader import Artifact
from mol.runtime.engine import Engine, LiteLLMEngine
from mol.runtime.runtime import Runtime

log = logging.getLogger("mol.runtime")


async def collect_orphans(*, servers: bool = True) -> list[str]:
    """Remove the sandboxes (containers, egress networks) and, unless ``servers`` is false,
    the MCP server processes left by runtimes that died (e.g. SIGKILL); the ids of the
    sandboxes removed. Never fails: without a Docker engine there is none to collect."""
    from mol.runtime.mcp.server import collect_orphan_servers
    from mol.sandboxes.owner import gc_orphans

    removed: list[str] = []
    try:
        with anyio.move_on_after(30):
            removed = await gc_orphans()
            if removed:
                log.info("removed %d orphaned sandbox container(s)", len(removed))
    except SandboxError as exc:  # no Docker engine here: nothing to collect
        log.debug("sandbox gc skipped: %s", exc)
    if servers:
        await collect_orphan_servers()
    return removed


@asynccontextmanager
async def open_engine(artifact: Artifact, engine_url: str | None = None
                      ) -> AsyncIterator[Engine]:
    """The engine ``artifact`` names (at ``engine_url`` when given); for an ``engine.kind =
    "local"`` artifact, the embedded engine is started when nothing answers there yet, and
    stopped at the end."""
    async with AsyncExitStack() as stack:
        if artifact.doc.engine.kind == "local":
            from mol.runtime.llamacpp.supervisor import ensure_local_engine

            await stack.enter_async_context(ensure_local_engine(
                artifact, api_base=engine_url or os.environ.get("MOL_ENGINE_URL")))
        yield LiteLLMEngine.from_artifact(artifact, engine_url)


@asynccontextmanager
async def open_mcp_servers(artifact: Artifact, servers: dict[str, Any], *,
                           engine: Engine | None = None, elicit: Any = None
                           ) -> AsyncIterator[Any]:
    """A toolset of MCP servers besides the artifact's (``servers``: name -> an
    ``MCPServerConfig``; an editor's own under ``mol acp``), for ``Session(toolsets=...)``:
    every adapter sees their tools, which its tool policy allows, asks for or hides like any
    other (``mcp__<server>__<tool>``). They start in the background and stop at the end."""
    from mol.runtime.mcp import MCPManager

    async with MCPManager(artifact, servers=servers, engine=engine, elicit=elicit) as manager:
        yield manager


@asynccontextmanager
async def open_runtime(artifact: Artifact, *, engine_url: str | None = None,
                       engine: Engine | None = None, plugins: Any = None, elicit: Any = None,
                       collect_orphans: bool = True, tracer: Any = None
                       ) -> AsyncIterator[Runtime]:
    """A ready runtime for ``artifact``; closes every resource it opened on exit.

    ``engine``: the engine to use (``open_engine``'s when None: the embedded one started
    on demand); ``plugins``: a ``PluginManager`` (the artifact's own when None); ``elicit``
    answers MCP servers' requests for input when a call has no asker of its own (a person
    at the terminal); without it they are declined. ``collect_orphans=False`` skips the
    collection of what dead runtimes left (a Docker listing and a scan of ``/proc``).
    ``tracer``: a tracer its owner shares (``mol.runtime.tracing.open_tracer``; an eval run's
    episodes share the run's); when None, the runtime opens its own when tracing is on.
    What the caller's block raises comes out as raised, not wrapped in the exception groups
    of the background task groups.
    """
    try:
        async with _opened(artifact, engine_url, engine, plugins, elicit,
                           collect_orphans, tracer) as runtime:
            yield runtime
    except BaseExceptionGroup as group:
        leaves = exception_leaves(group)
        if len(leaves) != 1:
            raise
        leaf = leaves[0]
        leaf.__suppress_context__ = True  # the group is ours, not the caller's concern
        raise leaf  # noqa: B904 - keeps the leaf's own cause


@asynccontextmanager
async def _opened(artifact: Artifact, engine_url: str | None, engine: Engine | None,
                  plugins: Any, elicit: Any, collect: bool, tracer: Any
                  ) -> AsyncIterator[Runtime]:
    async with AsyncExitStack() as stack:
        if tracer is None:
            from mol.runtime.tracing import open_tracer

            # Entered first, so it exports last: after the servers and sandboxes are gone.
            tracer = await stack.enter_async_context(open_tracer(artifact))
        background = await stack.enter_async_context(anyio.create_task_group())
        managed = any(server.enabled for server in artifact.doc.mcp_servers.values())
        if collect:
            # An MCP manager ends the servers a dead runtime left itself, as it starts.
            background.start_soon(partial(collect_orphans, servers=not managed))
        if plugins is None:
            from mol.plugins.manager import PluginManager

            plugins = PluginManager.for_artifact(artifact)
        if engine is None:
            engine = await stack.enter_async_context(open_engine(artifact, engine_url))
        toolsets = []
        if managed:
            from mol.runtime.mcp import MCPManager

            # Servers start in the background: the first turn waits only for the
            # servers its adapter sees. MCP sampling answers through the runtime's engine.
            toolsets.append(await stack.enter_async_context(
                MCPManager(artifact, elicit=elicit, engine=engine)))
        pool = None
        if artifact.doc.sandbox.pool_size > 0:
            from mol.sandboxes.pool import SandboxPool

            # Warm sandboxes fill in the background; a session takes one on first use.
            pool = await stack.enter_async_context(SandboxPool(artifact.doc.sandbox))
        yield Runtime(artifact, engine=engine, plugins=plugins, toolsets=toolsets,
                      sandbox_pool=pool, tracer=tracer)
