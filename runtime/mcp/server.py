"""One configured MCP server of a session: its connection, pinned tools, schemas, restarts.

``Server`` is what ``MCPManager`` keeps per ``[mcp_servers.NAME]``: it starts
the connection (``connection.run_connection``), pins tool definitions when
first seen and disables a pinned tool whose definition changes, compiles each
tool's input schema once (off the event loop; a schema mol cannot use disables
its tool with the reason), and restarts a dead server on next use, with
backoff. This module never imports ``mcp``.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

import anyio

from mol.core.errors import MCPError, MCPServerDied, MCPStartupError
from mol.core.tools import Tool, ToolContext, ToolResult
from mol.runtime.mcp.answers import Answers
from mol.runtime.mcp.naming import (
    definition_digest,
    filter_tools,
    qualified_name,
    resource_tool_name,
)
from mol.runtime.mcp.results import cap_text, describe_resource, result_text

logger = logging.getLogger("mol.mcp")

SANDBOX_RESOURCE = "sandbox"
"""The session resource key of the sandbox (``mol.plugins.builtin.sandbox``)."""

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


class Server:
    """One configured server: its connection, pins, schemas and restart state."""

    def __init__(self, manager: Any, name: str, config: Any) -> None:
        """``manager`` is the owning ``MCPManager`` (its task group, artifact and caps)."""
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
        self.schemas: dict[str, Any] = {}
        """Raw tool name -> its ``CompiledSchema`` (checked once, when first listed)."""
        self.broken: dict[str, str] = {}
        """Raw tool name -> why its schema cannot be used (the tool is disabled)."""
        self.resources: list[Any] = []
        """The resources as first listed (the reader tool's description stays as it was)."""
        self.updated: set[str] = set()
        """Resource URIs the server said changed (``resources/updated``)."""
        self.answers = Answers(name, config, manager.artifact.base_dir, manager)
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
        await self.refresh(conn)
        if not self.resources:
            self.resources = await conn.list_resources()
        await conn.opened()

    async def on_change(self, conn: Any, what: str) -> None:
        """A list other than the tools changed, or a subscribed resource did."""
        if what.startswith("resource:"):
            self.updated.add(what.removeprefix("resource:"))
        logger.info("MCP server %r: %s changed", self.name, what)

    async def refresh(self, conn: Any) -> None:
        definitions = await conn.list_tools()
        self.absorb(definitions)
        fresh = [d for d in definitions if d.name in self.definitions
                 and d.name not in self.schemas and d.name not in self.broken]
        # A hostile schema may be slow to check: never on the event loop.
        checked = await anyio.to_thread.run_sync(_compile_all, fresh)
        for raw, outcome in checked.items():
            if isinstance(outcome, str):
                self.broken[raw] = f"its input schema cannot be used: {outcome}"
                logger.warning("MCP server %r: tool %r disabled: %s", self.name, raw, outcome)
            else:
                self.schemas[raw] = outcome

    async def connect(self) -> Any:
        from mol.runtime.mcp.lifecycle import Startup, run_connection

        startup = Startup()
        self.manager.task_group.start_soon(
            run_connection, self.name, self.config, self.manager.artifact.base_dir, startup,
            self.refresh, self.opened, self.answers, self.on_change)
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

    async def call_tool(self, raw: str, arguments: dict[str, Any],
                        context: ToolContext | None = None) -> ToolResult:
        """Call server tool ``raw`` for ``context``'s call (server requests meanwhile are
        attributed to it); an ``isError`` result becomes an error ``ToolResult``."""
        if raw in self.changed:
            return ToolResult(f"Error: tool {raw!r} of MCP server {self.name!r} is disabled for "
                              f"this session: {self.changed[raw]}", is_error=True)
        conn = await self.connection()
        if raw not in self.present:
            return ToolResult(f"Error: MCP server {self.name!r} no longer offers tool {raw!r}",
                              is_error=True)
        await self._offer_workspace(conn, context)
        with self.answers.calling(context):
            result = await conn.call_tool(raw, arguments, context)
        self.failures = 0
        text = result_text(result.content, result.structured_content, self.manager.max_result_chars)
        return ToolResult(text, is_error=bool(result.is_error), data=result.structured_content)

    async def _offer_workspace(self, conn: Any, context: ToolContext | None) -> None:
        """Offer the session's sandbox workspace as a root once it exists (``list_changed``)."""
        resources = getattr(context, "resources", None)
        artifact = getattr(context, "artifact", None) or self.manager.artifact
        if self.answers.workspace or resources is None or resources.peek(SANDBOX_RESOURCE) is None:
            return
        self.answers.workspace = artifact.doc.sandbox.workspace
        await conn.roots_changed()

    async def read_resource(self, uri: str) -> ToolResult:
        conn = await self.connection()
        contents = await conn.read_resource(uri)
        text = "\n".join(describe_resource(c) for c in contents)
        return ToolResult(cap_text(text, self.manager.max_result_chars))

    def tools(self) -> list[Tool]:
        """The server's tools a model may see now (pinned, offered, unchanged)."""
        result = []
        for raw in sorted(self.present):
            if raw in self.changed or raw not in self.schemas:
                continue
            definition = self.definitions[raw]
            result.append(Tool(
                name=qualified_name(self.name, raw),
                description=definition.description or definition.title or raw,
                parameters=definition.input_schema, validate=self.schemas[raw].check_async,
                call=self._caller(raw), source=f"mcp:{self.name}"))
        return result

    def _caller(self, raw: str) -> Any:
        async def call(arguments: dict[str, Any], context: ToolContext) -> ToolResult:
            return await self.call_tool(raw, arguments, context)
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
            disabled_tools={qualified_name(self.name, raw): why
                            for raw, why in {**self.broken, **self.changed}.items()})


async def collect_orphan_servers() -> None:
    """End stdio servers left by runtimes that died (e.g. SIGKILL); never fails a start."""
    from mol.runtime.mcp.process import reap_orphans

    try:
        victims = await anyio.to_thread.run_sync(reap_orphans)
    except OSError as exc:  # no /proc here: nothing to collect
        logger.debug("MCP orphan collection skipped: %s", exc)
        return
    if victims:
        logger.info("ended %d MCP server process(es) left by a runtime that died: %s",
                    len(victims), ", ".join(map(str, victims)))


def _compile_all(definitions: list[Any]) -> dict[str, Any]:
    """Each tool's ``CompiledSchema``, or the reason its schema cannot be used."""
    from mol.core.schemas import SchemaProblem, compile_schema

    checked: dict[str, Any] = {}
    for definition in definitions:
        try:
            checked[definition.name] = compile_schema(definition.input_schema)
        except SchemaProblem as exc:
            checked[definition.name] = str(exc)
    return checked


def backoff_delay(failures: int) -> float:
    """Seconds to wait before restarting a server that died ``failures`` times in a row."""
    if failures <= 1:
        return 0.0
    return min(30.0, 2.0 ** (failures - 2))
