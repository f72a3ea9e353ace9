"""A connection's life: open it, negotiate the era, watch it, tear it down.

``run_connection`` opens a connection (a stdio server mol spawns itself, or
streamable HTTP, through ``mol.runtime.mcp.sdk``), negotiates the protocol
era (the 2026-07-28 stateless core, or the older ``initialize`` handshake most
published servers speak), watches it, and tears it down; its ``Startup``
says how the start went before any teardown runs.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from mol.core.errors import MCPError, MCPStartupError
from mol.runtime.mcp import sdk
from mol.runtime.mcp.connection import Connection

logger = logging.getLogger("mol.mcp")


@dataclass
class Startup:
    """The outcome of one connection attempt, known before any teardown runs."""

    done: anyio.Event = field(default_factory=anyio.Event)
    connection: Connection | None = None
    error: MCPStartupError | None = None



async def run_connection(name: str, config: Any, base_dir: Path, startup: Startup,
                         refresh: Callable[[Connection], Awaitable[None]],
                         opened: Callable[[Connection], Awaitable[None]], answers: Any = None,
                         on_change: Callable[[Connection, str], Awaitable[None]] | None = None
                         ) -> None:
    """Open, serve and close one connection; outcome in ``startup`` (never raises).

    ``opened`` runs once the session is up, within the startup deadline (the
    manager lists and pins tools there). The outcome is known before any
    teardown runs. The connection lives until it is closed or fails; then its
    server is shut down (stdio: no survivors).
    """
    await sdk.load()
    conn = Connection(name, config, answers, on_change)
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
        conn.ended.set()


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
            conn.task_group = tg
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
        reason = conn.failure or conn.unauthorized_reason() or _explain(exc)
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
