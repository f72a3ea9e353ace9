"""``MCPManager``: every MCP server of a session, as tools an adapter can call.

``async with MCPManager(artifact) as mcp:`` starts all enabled servers at once
in the background, so startup stays off the critical path of the first turn;
``await mcp.tools("L1")`` waits only for the servers L1 sees (each bounded by
its ``startup_timeout_sec``). A ``required`` server that fails makes
``tools()`` and ``wait_ready()`` raise ``MCPStartupError`` naming it; any other
failed server is reported in ``status()`` and skipped. ``servers`` replaces the artifact's
servers with others that every adapter sees (an editor's own, under ``mol acp``).

Tool definitions are pinned by digest when first seen. A server that later
changes a pinned tool (on ``list_changed`` or after a restart) gets that tool
disabled for the session, with a warning on the ``mol.mcp`` logger. A server
that dies is restarted on next use, with backoff after repeated deaths.

This module never imports ``mcp``; ``mol.runtime.mcp.sdk`` is the SDK boundary.
"""

from __future__ import annotations

import logging
from contextlib import AsyncExitStack
from typing import Any

import anyio

from mol.core.errors import MCPError, MCPStartupError, ToolError
from mol.core.tools import Tool, ToolContext, ToolResult, run_tool
from mol.runtime.mcp.naming import RESOURCE_TOOL
from mol.runtime.mcp.server import Server, ServerStatus, collect_orphan_servers

logger = logging.getLogger("mol.mcp")

MAX_RESULT_CHARS = 32_000
"""Default cap of the text of one MCP result a model reads."""
SHUTDOWN_CAP_SEC = 3.0
"""How long the servers' orderly teardown may take before it is cut short."""


class MCPManager:
    """Owns every MCP server of a session (``async with``); hands adapters their tools."""

    def __init__(self, artifact: Any, *, max_result_chars: int = MAX_RESULT_CHARS,
                 elicit: Any = None, engine: Any = None, sign_in: Any = None,
                 servers: dict[str, Any] | None = None) -> None:
        self.artifact = artifact
        self.max_result_chars = max_result_chars
        self.elicit = elicit
        """Asks the person when a server elicits input and the call has no asker of its own."""
        self.engine = engine
        """The engine MCP sampling answers through (the harness's; built when first needed)."""
        self.sign_in = sign_in
        """``await sign_in(url)`` shows a person an OAuth authorization URL (``mol mcp login``);
        None: a server needing a sign-in fails, naming ``mol mcp login``."""
        self.everyone = servers is not None
        """Every adapter sees every server (a client's own servers, ``servers``), rather than
        the servers its ``mcp_servers`` names; its tool policy still decides."""
        configs = artifact.doc.mcp_servers if servers is None else servers
        self.servers = {name: Server(self, name, config) for name, config in configs.items()}
        self._tg: anyio.abc.TaskGroup | None = None
        self._stack = AsyncExitStack()

    @property
    def task_group(self) -> anyio.abc.TaskGroup:
        """The group the connection tasks run in."""
        if self._tg is None:
            raise MCPError("MCPManager is not entered (use 'async with MCPManager(...)')")
        return self._tg

    async def __aenter__(self) -> MCPManager:
        async with AsyncExitStack() as stack:
            stack.callback(self._forget)  # runs after the task group has ended
            self._tg = await stack.enter_async_context(anyio.create_task_group())
            self._tg.start_soon(collect_orphan_servers)
            for server in self.servers.values():
                if server.config.enabled:
                    self._tg.start_soon(server.first_start)
                else:
                    server.ready.set()
            self._stack = stack.pop_all()
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Stop every server: HTTP sessions end with their ``DELETE``, stdio servers get
        their stdin closed, then SIGTERM, then SIGKILL (no survivors)."""
        assert self._tg is not None
        # Close first and give the teardowns a short while: cancelling at once would
        # cut the HTTP session's DELETE before it is sent.
        ending = [s.conn for s in self.servers.values() if s.conn is not None]
        for conn in ending:
            conn.close()
        with anyio.move_on_after(SHUTDOWN_CAP_SEC):
            for conn in ending:
                await conn.ended.wait()
        self._tg.cancel_scope.cancel()
        await self._stack.aclose()

    def sampling_engine(self) -> Any:
        """The engine for servers' sampling requests."""
        if self.engine is None:
            from mol.runtime.engine import LiteLLMEngine

            self.engine = LiteLLMEngine.from_artifact(self.artifact)
        return self.engine

    def _forget(self) -> None:
        self._tg = None
        for server in self.servers.values():
            server.conn = None

    def _visible_servers(self, adapter: str | None) -> list[Server]:
        if adapter is None or self.everyone:
            return list(self.servers.values())
        names = self.artifact.doc.adapter(adapter).mcp_servers
        return [self.servers[n] for n in names if n in self.servers]

    async def wait_ready(self, adapter: str | None = None) -> None:
        """Wait for the startup of the servers ``adapter`` sees (all when None).

        Raises ``MCPStartupError`` naming a ``required`` server that failed, and why.
        """
        servers = self._visible_servers(adapter)
        for server in servers:
            with anyio.fail_after(server.config.startup_timeout_sec + 15):
                await server.ready.wait()
        failed = [s.error for s in servers if s.config.required and s.state == "failed"]
        if failed:
            raise MCPStartupError("a required MCP server failed to start: " + "; ".join(failed))

    async def tools(self, adapter: str) -> list[Tool]:
        """The MCP tools ``adapter`` sees: its servers' tools after ``enabled_tools`` /
        ``disabled_tools``, plus the resource reader of a server when the adapter's
        policy names it exactly (``mcp__<server>__read_resource`` in ``allow`` or ``ask``).
        The adapter's allow/ask/deny globs are applied by the harness on top."""
        await self.wait_ready(adapter)
        policy = self.artifact.doc.adapter(adapter).tools
        result: list[Tool] = []
        for server in self._visible_servers(adapter):
            if server.state in ("failed", "disabled"):
                continue
            result.extend(server.tools())
            reader = server.resource_tool()
            if reader and reader.name in (*policy.allow, *policy.ask) and reader.name not in policy.deny:
                result.append(reader)
        return result

    async def call(self, adapter: str, name: str, arguments: str | dict[str, Any] | None,
                   context: ToolContext | None = None) -> ToolResult:
        """Call tool ``name`` as ``adapter`` would: a tool it does not see is refused,
        even when the server has it (the harness path for MCP tools)."""
        tool = {t.name: t for t in await self.tools(adapter)}.get(name)
        if tool is None:
            return ToolResult(f"Error: unknown tool {name!r} for adapter {adapter}", is_error=True)
        return await run_tool(tool, arguments, context or ToolContext(adapter=adapter))

    async def all_tools(self) -> list[Tool]:
        """Every exposed tool of every started server (the operator's view, ``mol mcp``)."""
        await self.wait_ready()
        return [t for s in self.servers.values() if s.state not in ("failed", "disabled")
                for t in s.tools()]

    def status(self) -> list[ServerStatus]:
        """The state of every configured server."""
        return [server.status() for server in self.servers.values()]

    def _server(self, name: str) -> Server:
        if name not in self.servers:
            raise ToolError(f"no MCP server named {name!r} (known: {', '.join(self.servers) or 'none'})")
        return self.servers[name]

    async def resources(self) -> list[tuple[str, Any]]:
        """(server, resource) for every resource of every started server."""
        await self.wait_ready()
        found = []
        for server in self.servers.values():
            if server.state == "ready":
                found += [(server.name, r) for r in await (await server.connection()).list_resources()]
        return found

    async def read_resource(self, server: str, uri: str) -> ToolResult:
        """The text of resource ``uri`` of ``server``."""
        await self.wait_ready()
        return await self._server(server).read_resource(uri)

    async def prompts(self) -> list[tuple[str, Any]]:
        """(server, prompt) for every prompt of every started server."""
        await self.wait_ready()
        found = []
        for server in self.servers.values():
            if server.state == "ready":
                found += [(server.name, p) for p in await (await server.connection()).list_prompts()]
        return found

    async def get_prompt(self, server: str, name: str, arguments: dict[str, str] | None = None) -> Any:
        """Prompt ``name`` of ``server`` rendered with ``arguments`` (the SDK's result)."""
        await self.wait_ready()
        return await (await self._server(server).connection()).get_prompt(name, arguments)



__all__ = ["RESOURCE_TOOL", "MCPManager", "ServerStatus"]
