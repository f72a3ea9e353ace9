"""One live connection to an MCP server, from its start to its teardown.

``run_connection`` opens a connection (a stdio server mol spawns itself, or
streamable HTTP, through ``mol.runtime.mcp.sdk``), negotiates the protocol
era (the 2026-07-28 stateless core, or the older ``initialize`` handshake most
published servers speak), watches it, and tears it down. ``Connection`` wraps
the SDK client: every request runs under ``tool_timeout_sec`` and fails at
once when the server dies meanwhile.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from mol.runtime.errors import MCPError, MCPServerDied, MCPStartupError, MCPTimeout
from mol.runtime.mcp import sdk
from mol.runtime.mcp.process import ServerProcess

logger = logging.getLogger("mol.mcp")

_PAGE_CAP = 100
"""Most pages of a paginated listing read before giving up (a server paging forever)."""


@dataclass
class Startup:
    """The outcome of one connection attempt, known before any teardown runs."""

    done: anyio.Event = field(default_factory=anyio.Event)
    connection: Connection | None = None
    error: MCPStartupError | None = None


class Connection:
    """A live session with one server; ``failure`` says why it ended, when it did."""

    def __init__(self, name: str, config: Any) -> None:
        self.name = name
        self.config = config
        self.client: Any = None
        self.process: ServerProcess | None = None
        self.failure: str | None = None
        self.established = False
        self.closed = anyio.Event()
        self._inflight: set[anyio.CancelScope] = set()
        self._changes_send, self._changes = anyio.create_memory_object_stream[None](1)

    @property
    def alive(self) -> bool:
        """Whether calls can go to this connection."""
        return not self.closed.is_set()

    @property
    def protocol_version(self) -> str | None:
        """The negotiated protocol version."""
        return self.client.session.protocol_version if self.client else None

    @property
    def pid(self) -> int | None:
        """The pid of a stdio server."""
        return self.process.pid if self.process else None

    def capability(self, name: str) -> Any:
        """The server's capability ``name`` (``tools``, ``resources``, ``prompts``), or None."""
        caps = self.client.session.server_capabilities if self.client else None
        return getattr(caps, name, None) if caps else None

    def fail(self, reason: str) -> None:
        """End the connection because the server misbehaved or died."""
        if self.failure is None and not self.closed.is_set():
            self.failure = reason
            # A failed start is reported once, by the manager, as a startup error.
            log = logger.warning if self.established else logger.debug
            log("MCP server %r: %s", self.name, reason)
        self.closed.set()
        for scope in list(self._inflight):
            scope.cancel()

    def close(self) -> None:
        """End the connection on purpose (session shutdown)."""
        self.closed.set()

    def release(self) -> None:
        """Free the connection's streams (after its tasks ended)."""
        self._changes_send.close()
        self._changes.close()

    # -- requests --------------------------------------------------------------

    async def list_tools(self) -> list[Any]:
        """Every tool of the server (all pages)."""
        return await self._all_pages(lambda cursor: self.client.list_tools(cursor=cursor), "tools")

    async def list_resources(self) -> list[Any]:
        """Every resource of the server (all pages); empty without the capability."""
        if not self.capability("resources"):
            return []
        return await self._all_pages(
            lambda cursor: self.client.list_resources(cursor=cursor), "resources")

    async def list_prompts(self) -> list[Any]:
        """Every prompt of the server (all pages); empty without the capability."""
        if not self.capability("prompts"):
            return []
        return await self._all_pages(lambda cursor: self.client.list_prompts(cursor=cursor), "prompts")

    async def _all_pages(self, fetch: Callable[[str | None], Awaitable[Any]], key: str) -> list[Any]:
        items: list[Any] = []
        cursor = None
        for _ in range(_PAGE_CAP):
            page = await self.request(fetch(cursor), f"{key}/list")
            items.extend(getattr(page, key))
            cursor = page.next_cursor
            if cursor is None:
                return items
        raise MCPError(f"MCP server {self.name!r} paged its {key} list beyond {_PAGE_CAP} pages")

    async def read_resource(self, uri: str) -> list[Any]:
        """The contents of resource ``uri``."""
        result = await self.request(self.client.read_resource(uri), f"resources/read {uri}")
        return list(result.contents)

    async def get_prompt(self, name: str, arguments: dict[str, str] | None) -> Any:
        """Prompt ``name`` rendered with ``arguments``."""
        return await self.request(self.client.get_prompt(name, arguments), f"prompts/get {name}")

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """Call tool ``name`` under ``tool_timeout_sec``; returns the SDK's ``CallToolResult``.

        Progress notifications are logged and never extend the deadline. On
        timeout the SDK sends ``notifications/cancelled`` for the request (it
        does so whenever a request is abandoned) and the session stays usable.
        """
        async def progress(done: float, total: float | None, message: str | None) -> None:
            logger.debug("MCP %s/%s progress %s/%s %s", self.name, name, done, total, message or "")

        return await self.request(
            self.client.call_tool(name, arguments, progress_callback=progress),
            f"tool {name!r}")

    async def request(self, awaitable: Awaitable[Any], what: str) -> Any:
        """Await one SDK request under ``tool_timeout_sec``, translating failures to ``MCPError``s.

        A connection that fails meanwhile fails the request at once, whatever
        the transport is waiting for.
        """
        limit = self.config.tool_timeout_sec
        if self.closed.is_set():
            awaitable.close()  # type: ignore[attr-defined]
            raise self._died(what)
        scope = anyio.CancelScope()
        self._inflight.add(scope)
        try:
            with anyio.fail_after(limit), scope:
                return await awaitable
        except TimeoutError:
            raise MCPTimeout(f"MCP server {self.name!r}: {what} timed out after {limit:g}s "
                             "(the server was asked to cancel it)") from None
        except Exception as exc:
            failure = sdk.failure_of(exc)
            if failure is None:
                raise
            if failure.closed:
                self.fail("the connection closed")
            if self.closed.is_set():
                raise self._died(what) from exc
            raise MCPError(f"MCP server {self.name!r}: {what} {failure.message}") from exc
        finally:
            self._inflight.discard(scope)
        raise self._died(what)  # ``fail`` cancelled the request

    def _died(self, what: str) -> MCPServerDied:
        reason = self.failure or "the connection closed"
        return MCPServerDied(f"MCP server {self.name!r} failed during {what}: {reason}")

    # -- change notifications --------------------------------------------------

    async def on_message(self, message: Any) -> None:
        """SDK message handler: list_changed (handshake era) and transport errors."""
        if sdk.is_tools_changed(message):
            self._signal_change()
        elif isinstance(message, Exception):
            # Only the HTTP transport reports errors this way: treat it like a dead
            # process (fail what is in flight; the next call reconnects).
            self.fail(f"transport error: {type(message).__name__}: {message}")

    def _signal_change(self) -> None:
        # One pending refresh is enough: it reads the whole list.
        try:
            self._changes_send.send_nowait(None)
        except anyio.WouldBlock:
            pass

    async def watch_tool_changes(self, refresh: Callable[[Connection], Awaitable[None]], *,
                                 task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Call ``refresh`` whenever the server says its tool list changed (both eras).

        Reports started once a 2026-07-28 subscription is acknowledged, so no
        change made after startup can be missed.
        """
        tools = self.capability("tools")
        async with anyio.create_task_group() as tg:
            # 2026-07-28 servers announce changes only on a subscription, when they
            # advertise it; older ones send notifications, advertised or not.
            if sdk.is_modern(self.protocol_version) and tools and tools.list_changed:
                await tg.start(self._listen)
            task_status.started()
            async for _ in self._changes:
                try:
                    await refresh(self)
                except MCPError as exc:
                    logger.warning("MCP server %r: refreshing tools failed: %s", self.name, exc)

    async def _listen(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        started = False
        try:
            async with self.client.listen(tools_list_changed=True) as subscription:
                task_status.started()
                started = True
                async for _ in subscription:
                    self._signal_change()
        except Exception as exc:  # a lost subscription must not end the connection
            logger.info("MCP server %r: change subscription ended: %s", self.name, exc)
            if not started:
                task_status.started()


async def run_connection(name: str, config: Any, base_dir: Path, startup: Startup,
                         refresh: Callable[[Connection], Awaitable[None]],
                         opened: Callable[[Connection], Awaitable[None]]) -> None:
    """Open, serve and close one connection; outcome in ``startup`` (never raises).

    ``opened`` runs once the session is up, within the startup deadline (the
    manager lists and pins tools there). The outcome is known before any
    teardown runs. The connection lives until it is closed or fails; then its
    server is shut down (stdio: no survivors).
    """
    await sdk.load()
    conn = Connection(name, config)
    # One scope around the whole connection (not a fail_after around the opening
    # only): the transport's task groups must nest inside it.
    scope = anyio.CancelScope()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_watchdog, conn, startup, scope)
            with scope:
                await _serve(conn, startup, base_dir, refresh, opened, scope)
            tg.cancel_scope.cancel()
    except Exception as exc:  # the failure is in ``startup``; teardown trouble must not spread
        if startup.connection is not None:
            logger.warning("MCP server %r: error while closing: %s", name, _explain(exc))
    finally:
        conn.close()
        conn.release()
        startup.done.set()


async def _watchdog(conn: Connection, startup: Startup, scope: anyio.CancelScope) -> None:
    """Fail a start at ``startup_timeout_sec`` at once; the teardown follows."""
    await anyio.sleep(conn.config.startup_timeout_sec)
    if not startup.done.is_set():
        _startup_failed(conn, startup, TimeoutError(), timed_out=True)
        scope.cancel()


async def _serve(conn: Connection, startup: Startup, base_dir: Path,
                 refresh: Callable[[Connection], Awaitable[None]],
                 opened: Callable[[Connection], Awaitable[None]], scope: anyio.CancelScope) -> None:
    async with AsyncExitStack() as stack:
        try:
            conn.client = await sdk.open_client(conn, stack, base_dir)
            # Subscribe to changes before listing: nothing falls in between.
            tg = await stack.enter_async_context(anyio.create_task_group())
            await tg.start(conn.watch_tool_changes, refresh)
            await opened(conn)
        except BaseException as exc:
            _startup_failed(conn, startup, exc, timed_out=scope.cancel_called)
            raise
        conn.established = True
        startup.connection = conn
        startup.done.set()
        await conn.closed.wait()
        tg.cancel_scope.cancel()


def _startup_failed(conn: Connection, startup: Startup, exc: BaseException, timed_out: bool) -> None:
    if startup.done.is_set():
        return
    if timed_out:
        reason = (f"no answer to initialize within startup_timeout_sec="
                  f"{conn.config.startup_timeout_sec:g}s")
    elif isinstance(exc, anyio.get_cancelled_exc_class()):
        reason = "the session ended during startup"
    else:
        reason = conn.failure or _explain(exc)
    startup.error = MCPStartupError(f"MCP server {conn.name!r} failed to start: {reason}")
    startup.error.__cause__ = exc if isinstance(exc, Exception) else None
    conn.fail(reason)
    startup.done.set()


def _explain(exc: BaseException) -> str:
    """A one-line reason for a failure."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or exc}"
    return f"{type(exc).__name__}: {exc}" if not isinstance(exc, MCPError) else str(exc)
