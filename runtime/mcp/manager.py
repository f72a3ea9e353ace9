"""``MCPManager``: every MCP server of a session, as tools an adapter can call.

``async with MCPManager(artifact) as mcp:`` starts all enabled servers at once
in the background, so startup stays off the critical path of the first turn;
``await mcp.tools("L1")`` waits only for the servers L1 sees (each bounded by
its ``startup_timeout_sec``). A ``required`` server that fails makes
``tools()`` and ``wait_ready()`` raise ``MCPStartupError`` naming it; any other
failed server is reported in ``status()`` and skipped.

Tool definitions are pinned by digest when first seen. A server that later
changes a pinned tool (on ``list_changed`` or after a restart) gets that tool
disabled for the session, with a warning on the ``mol.mcp`` logger. A server
that dies is restarted on next use, with backoff after repeated deaths.

This module never imports ``mcp``; ``mol.runtime.mcp.sdk`` is the SDK boundary.
"""

from __future__ import annotations

import logging
import math
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import anyio

from mol.runtime.errors import MCPError, MCPServerDied, MCPStartupError, ToolError
from mol.runtime.mcp.naming import (
    RESOURCE_TOOL,
    definition_digest,
    filter_tools,
    qualified_name,
    resource_tool_name,
)
from mol.runtime.mcp.results import cap_text, describe_resource, result_text
from mol.runtime.tools import Tool, ToolContext, ToolResult, run_tool

logger = logging.getLogger("mol.mcp")

MAX_RESULT_CHARS = 32_000
"""Default cap of the text of one MCP result a model reads."""
MAX_BACKOFF_WAIT_SEC = 2.0
"""A call waits out a restart backoff this short; a longer one fails the call at once."""
_RESOURCE_SCHEMA = {
    "type": "object",
    "properties": {"uri": {"type": "string", "description": "URI of the resource to read."}},
    "required": ["uri"],
    "additionalProperties": False,
}


@dataclass
class ServerStatus:
    """What ``mol mcp list`` shows about one server."""

    name: str
    transport: str
    state: str
    """``disabled``, ``starting``, ``ready``, ``failed`` (at startup) or ``down`` (died;
    restarted on next use)."""
    required: bool = False
    error: str | None = None
    protocol_version: str | None = None
    pid: int | None = None
    restarts: int = 0
    tools: list[str] = field(default_factory=list)
    """Qualified names of the tools exposed."""
    disabled_tools: dict[str, str] = field(default_factory=dict)
    """Qualified name -> why it was disabled for the session."""


class _Server:
    """One configured server: its connection, pins and restart state."""

    def __init__(self, manager: MCPManager, name: str, config: Any) -> None:
        self.manager = manager
        self.name = name
        self.config = config
        self.ready = anyio.Event()
        self.error: str | None = None
        self.conn: Any = None
        self.pins: dict[str, str] = {}
        self.definitions: dict[str, Any] = {}
        self.present: set[str] = set()
        self.changed: dict[str, str] = {}
        self.resources: list[Any] = []
        self.failures = 0
        self.last_death = -math.inf
        self.restarts = 0
        self._lock = anyio.Lock()

    @property
    def state(self) -> str:
        if not self.config.enabled:
            return "disabled"
        if not self.ready.is_set():
            return "starting"
        if self.error is not None and not self.pins:
            return "failed"
        return "ready" if self.conn is not None and self.conn.alive else "down"

    def absorb(self, definitions: list[Any]) -> None:
        """Take a fresh tool list: pin new tools, disable pinned tools whose definition changed."""
        exposed = filter_tools((d.name for d in definitions), self.config.enabled_tools,
                               self.config.disabled_tools)
        present = set()
        for definition in definitions:
            raw = definition.name
            if raw not in exposed:
                continue
            present.add(raw)
            digest = definition_digest(definition)
            pinned = self.pins.setdefault(raw, digest)
            if pinned == digest:
                self.definitions.setdefault(raw, definition)
            elif raw not in self.changed:
                self.changed[raw] = ("its definition changed after the session pinned it "
                                     f"({pinned[:19]} -> {digest[:19]})")
                logger.warning("MCP server %r changed tool %r mid-session; disabled for this "
                               "session (pinned %s, now %s)", self.name, raw, pinned, digest)
        self.present = present

    async def opened(self, conn: Any) -> None:
        self.absorb(await conn.list_tools())
        self.resources = await conn.list_resources()

    async def refresh(self, conn: Any) -> None:
        self.absorb(await conn.list_tools())

    async def connect(self) -> Any:
        from mol.runtime.mcp.connection import Startup, run_connection

        startup = Startup()
        self.manager.task_group.start_soon(
            run_connection, self.name, self.config, self.manager.artifact.base_dir, startup,
            self.refresh, self.opened)
        await startup.done.wait()
        if startup.error is not None:
            raise startup.error
        self.conn = startup.connection
        return self.conn

    async def first_start(self) -> None:
        try:
            await self.connect()
            logger.info("MCP server %r ready (%s)", self.name, self.conn.protocol_version)
        except MCPStartupError as exc:
            self.error = str(exc)
            log = logger.error if self.config.required else logger.warning
            log("%s", exc)
        finally:
            self.ready.set()

    async def connection(self) -> Any:
        """The live connection, restarting a dead server (with backoff) when needed."""
        conn = self.conn
        if conn is not None and conn.alive:
            return conn
        with anyio.fail_after(self.config.startup_timeout_sec + 15):
            await self.ready.wait()
        if self.state in ("failed", "disabled"):
            raise MCPError(f"MCP server {self.name!r} is {self.state}: {self.error or ''}".rstrip(": "))
        async with self._lock:
            if self.conn is not None and self.conn.alive:
                return self.conn
            if self.conn is not None:
                self.failures += 1
                self.last_death = anyio.current_time()
                self.conn = None
            wait = backoff_delay(self.failures) - (anyio.current_time() - self.last_death)
            if wait > MAX_BACKOFF_WAIT_SEC:
                raise MCPServerDied(f"MCP server {self.name!r} died {self.failures} times in a "
                                    f"row; next restart attempt in {wait:.0f}s")
            await anyio.sleep(max(wait, 0))
            self.restarts += 1
            logger.info("restarting MCP server %r (restart %d)", self.name, self.restarts)
            try:
                return await self.connect()
            except MCPStartupError:
                self.failures += 1
                self.last_death = anyio.current_time()
                raise

    async def call_tool(self, raw: str, arguments: dict[str, Any]) -> ToolResult:
        """Call server tool ``raw``; an ``isError`` result becomes an error ``ToolResult``."""
        if raw in self.changed:
            return ToolResult(f"Error: tool {raw!r} of MCP server {self.name!r} is disabled for "
                              f"this session: {self.changed[raw]}", is_error=True)
        conn = await self.connection()
        if raw not in self.present:
            return ToolResult(f"Error: MCP server {self.name!r} no longer offers tool {raw!r}",
                              is_error=True)
        result = await conn.call_tool(raw, arguments)
        self.failures = 0
        text = result_text(result.content, result.structured_content, self.manager.max_result_chars)
        return ToolResult(text, is_error=bool(result.is_error), data=result.structured_content)

    async def read_resource(self, uri: str) -> ToolResult:
        conn = await self.connection()
        contents = await conn.read_resource(uri)
        text = "\n".join(describe_resource(c) for c in contents)
        return ToolResult(cap_text(text, self.manager.max_result_chars))

    def tools(self) -> list[Tool]:
        """The server's tools a model may see now (pinned, offered, unchanged)."""
        result = []
        for raw in sorted(self.present):
            if raw in self.changed or raw not in self.definitions:
                continue
            definition = self.definitions[raw]
            result.append(Tool(
                name=qualified_name(self.name, raw),
                description=definition.description or definition.title or raw,
                parameters=definition.input_schema,
                call=self._caller(raw), source=f"mcp:{self.name}"))
        return result

    def _caller(self, raw: str) -> Any:
        async def call(arguments: dict[str, Any], context: ToolContext) -> ToolResult:
            return await self.call_tool(raw, arguments)
        return call

    def resource_tool(self) -> Tool | None:
        if not self.resources:
            return None
        listing = "; ".join(f"{r.uri} ({r.name})" for r in self.resources[:20])
        more = f"; and {len(self.resources) - 20} more" if len(self.resources) > 20 else ""

        async def call(arguments: dict[str, Any], context: ToolContext) -> ToolResult:
            return await self.read_resource(arguments["uri"])

        return Tool(name=resource_tool_name(self.name), parameters=_RESOURCE_SCHEMA, call=call,
                    description=f"Read a resource of MCP server {self.name!r} by URI. "
                                f"Resources: {listing}{more}.",
                    source=f"mcp:{self.name}")

    def status(self) -> ServerStatus:
        conn = self.conn if self.conn is not None and self.conn.alive else None
        return ServerStatus(
            name=self.name, transport="stdio" if self.config.command else "http",
            state=self.state, required=self.config.required, error=self.error,
            protocol_version=conn.protocol_version if conn else None,
            pid=conn.pid if conn else None, restarts=self.restarts,
            tools=[t.name for t in self.tools()],
            disabled_tools={qualified_name(self.name, raw): why for raw, why in self.changed.items()})


class MCPManager:
    """Owns every MCP server of a session (``async with``); hands adapters their tools."""

    def __init__(self, artifact: Any, *, max_result_chars: int = MAX_RESULT_CHARS) -> None:
        self.artifact = artifact
        self.max_result_chars = max_result_chars
        self.servers = {name: _Server(self, name, config)
                        for name, config in artifact.doc.mcp_servers.items()}
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
            for server in self.servers.values():
                if server.config.enabled:
                    self._tg.start_soon(server.first_start)
                else:
                    server.ready.set()
            self._stack = stack.pop_all()
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Stop every server: each closes stdin, then terminates, then kills its process group."""
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        await self._stack.aclose()

    def _forget(self) -> None:
        self._tg = None
        for server in self.servers.values():
            server.conn = None

    def _visible_servers(self, adapter: str | None) -> list[_Server]:
        if adapter is None:
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

    def _server(self, name: str) -> _Server:
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


def backoff_delay(failures: int) -> float:
    """Seconds to wait before restarting a server that died ``failures`` times in a row."""
    if failures <= 1:
        return 0.0
    return min(30.0, 2.0 ** (failures - 2))


__all__ = ["RESOURCE_TOOL", "MCPManager", "ServerStatus"]
