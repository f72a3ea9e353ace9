"""The boundary to the ``mcp`` SDK: the only package that imports it.

It opens the SDK client over a transport (a stdio server process mol owns,
or streamable HTTP with the configured headers and OAuth, ``oauth``), with
the client side of the protocol (``callbacks``: sampling, elicitation, roots,
logging), and reads what the SDK hands back: which failures are SDK errors,
change notifications, protocol eras.
The SDK is imported inside functions: importing it costs more than a second,
which ``mol --help`` and sessions without MCP must not pay.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from mol.core import __version__
from mol.core.errors import MCPStartupError
from mol.runtime.mcp import limits
from mol.runtime.mcp.process import Oversize, ServerProcess, server_environment

logger = logging.getLogger("mol.mcp")


@dataclass(frozen=True)
class Failure:
    """An SDK failure of one request, in mol's words."""

    message: str
    closed: bool = False
    """The connection itself closed."""


def failure_of(exc: Exception) -> Failure | None:
    """What an exception raised by an SDK request means, or None when it is not the SDK's."""
    from mcp.shared.exceptions import MCPError as SDKError
    from mcp_types import CONNECTION_CLOSED
    from pydantic import ValidationError

    if isinstance(exc, SDKError):
        return Failure(f"failed: {exc}", closed=exc.code == CONNECTION_CLOSED)
    if isinstance(exc, ValidationError):
        return Failure(f"returned an invalid result: {exc.errors()[0]['msg']}")
    return None


def notice(message: Any) -> str | None:
    """What a server notification says changed (``tools``, ``resources``, ``prompts``,
    ``resource:<uri>``), or None."""
    from mol.runtime.mcp.sdk.callbacks import notice as classify

    return classify(message)


def event_kind(event: Any) -> str | None:
    """What a 2026-07-28 subscription event says changed (as ``notice`` does)."""
    name = type(event).__name__.lower()
    for kind in ("tools", "prompts", "resources"):
        if kind[:-1] in name and "list" in name:
            return kind
    uri = getattr(event, "uri", None)
    return f"resource:{uri}" if uri else None


def complete(client: Any, ref: dict[str, Any], argument: dict[str, str],
             context: dict[str, str] | None) -> Any:
    """``completion/complete`` of a prompt (``{"type": "ref/prompt", "name"}``) or a resource
    template (``{"type": "ref/resource", "uri"}``) argument."""
    from mcp import types

    model = types.PromptReference if ref.get("type") == "ref/prompt" else types.ResourceTemplateReference
    return client.complete(model.model_validate(ref), argument, context)


async def ping(client: Any, protocol_version: str | None) -> Any:
    """A liveness check: ``ping`` (handshake era) or a fresh ``server/discover``."""
    import mcp_types as types

    if is_modern(protocol_version):
        return await client.session.discover()
    return await client.session.send_request(types.PingRequest(), types.EmptyResult)


async def subscribe(client: Any, uri: str) -> Any:
    """``resources/subscribe`` (handshake era; the SDK's own method warns it is deprecated,
    but these servers speak only that era)."""
    import mcp_types as types

    request = types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
    return await client.session.send_request(request, types.EmptyResult)


async def set_log_level(client: Any, level: str) -> Any:
    """``logging/setLevel`` (handshake era; 2026-07-28 opts in per request)."""
    import mcp_types as types

    request = types.SetLevelRequest(params=types.SetLevelRequestParams(level=level))
    return await client.session.send_request(request, types.EmptyResult)


async def roots_changed(client: Any) -> None:
    """``notifications/roots/list_changed`` (handshake era)."""
    import mcp_types as types

    await client.session.send_notification(types.RootsListChangedNotification())


def is_modern(protocol_version: str | None) -> bool:
    """Whether a negotiated version is of the 2026-07-28 stateless era."""
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    return protocol_version in MODERN_PROTOCOL_VERSIONS


_sdk_loaded = False


async def load() -> None:
    """Import the SDK in a worker thread, once: it takes over a second, which must
    neither block the event loop nor count against a server's startup timeout."""
    global _sdk_loaded
    if not _sdk_loaded:
        await anyio.to_thread.run_sync(_import_sdk)
        _sdk_loaded = True


def _import_sdk() -> None:
    import httpx2  # noqa: F401
    import mcp
    import mcp.client.streamable_http
    import mcp.shared.message  # noqa: F401


async def open_client(conn: Any, stack: AsyncExitStack, base_dir: Path) -> Any:
    """The SDK client of ``conn`` (a ``Connection``), entered on ``stack``."""
    from mcp import Client
    from mcp.types import Implementation

    config = conn.config
    if config.command is not None:
        transport = _stdio_transport(conn, base_dir)
    else:
        transport = await _http_transport(conn, stack)
    from mol.runtime.mcp.sdk.callbacks import client_options

    client = Client(transport, mode="auto", cache=None, message_handler=conn.on_message,
                    client_info=Implementation(name="mol", version=__version__),
                    **client_options(conn.answers))
    return await stack.enter_async_context(client)


_INLINE_BYTES = 16 * 1024
"""Lines up to this size are decoded on the event loop (a thread hop costs more)."""


def _decode(line: bytes) -> Any:
    """One stdout line as an SDK JSON-RPC message, within ``limits`` (runs in a worker
    thread for all but small lines)."""
    import mcp_types

    try:
        return mcp_types.jsonrpc_message_adapter.validate_python(limits.parse(line), by_name=False)
    except RecursionError:
        raise limits.Refused("a message nested too deeply",
                             limits.request_id(line[:4096], line[-4096:])) from None


async def _refuse(conn: Any, read_send: Any, reason: str, request_id: Any) -> bool:
    """Fail the one request a refused message answered (the connection lives on), or,
    when it names none, end the connection; whether the connection lives on."""
    import mcp_types
    from mcp.shared.message import SessionMessage

    if request_id is None:
        conn.fail(f"wrote {reason}")
        return False
    logger.warning("MCP server %r: refused its answer to request %r: %s", conn.name, request_id,
                   reason)
    error = mcp_types.JSONRPCError(jsonrpc="2.0", id=request_id, error=mcp_types.ErrorData(
        code=mcp_types.INTERNAL_ERROR, message=f"mol refused the server's answer: {reason}"))
    await read_send.send(SessionMessage(error))
    return True


async def _pump_in(conn: Any, proc: ServerProcess, read_send: Any) -> None:
    """Server stdout -> the SDK: a line of garbage or EOF ends the connection (naming the
    exit status when the process died); an answer over mol's limits fails its request."""
    from mcp.shared.message import SessionMessage

    async with read_send:
        try:
            async for line in proc.lines():
                if isinstance(line, Oversize):
                    reason = (f"a message of {line.size} bytes or more (mol reads at most "
                              f"{limits_text()})")
                    if not await _refuse(conn, read_send, reason,
                                         limits.request_id(line.head, line.tail)):
                        return
                    continue
                if not line.strip():
                    continue
                try:
                    if len(line) <= _INLINE_BYTES:
                        message = _decode(line)
                    else:
                        message = await anyio.to_thread.run_sync(_decode, line)
                except limits.Refused as exc:
                    if not await _refuse(conn, read_send, str(exc), exc.request_id):
                        return
                    continue
                except ValueError:
                    conn.fail(f"wrote a line that is not JSON-RPC to stdout: {line[:200]!r}")
                    return
                await read_send.send(SessionMessage(message))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass
        await anyio.sleep(0.2)  # let the exit watcher name the exit status
        conn.fail(proc.describe_exit())


def limits_text() -> str:
    """The message size cap, for error messages."""
    from mol.runtime.mcp.process import MAX_MESSAGE_BYTES

    return f"{MAX_MESSAGE_BYTES // (1024 * 1024)} MiB per message"


@asynccontextmanager
async def _stdio_transport(conn: Any, base_dir: Path) -> AsyncIterator[Any]:
    """Streams to a server process mol spawns: a line of garbage or an exit ends the connection."""
    config = conn.config
    command = config.command
    if "/" in command and not Path(command).is_absolute():
        command = str((base_dir / command).resolve())
    cwd = (base_dir / config.cwd).resolve() if config.cwd else None
    env = server_environment(config.env, config.env_vars, config.env_from)
    async with ServerProcess([command, *config.args], env=env, cwd=cwd, label=conn.name) as proc:
        conn.process = proc
        read_send, read_recv = anyio.create_memory_object_stream[Any](0)
        write_send, write_recv = anyio.create_memory_object_stream[Any](0)

        async def pump_out() -> None:
            async with write_recv:
                async for message in write_recv:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    try:
                        await proc.send(data.encode() + b"\n")
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                        conn.fail(f"stopped reading its stdin ({proc.describe_exit()})")
                        return

        async def watch_exit() -> None:
            await proc.wait_exit()
            conn.fail(proc.describe_exit())

        async with anyio.create_task_group() as tg:
            tg.start_soon(_pump_in, conn, proc, read_send)
            tg.start_soon(pump_out)
            tg.start_soon(watch_exit)

            async def end_on_close() -> None:
                await conn.closed.wait()
                read_send.close()  # EOF for the SDK: it fails pending requests at once

            tg.start_soon(end_on_close)
            try:
                yield read_recv, write_send
            finally:
                tg.cancel_scope.cancel()
                for stream in (read_send, read_recv, write_send, write_recv):
                    stream.close()


async def _http_transport(conn: Any, stack: AsyncExitStack) -> Any:
    """The SDK's streamable HTTP transport with the configured headers."""
    import os

    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    config = conn.config
    headers = dict(config.http_headers)
    for header, var in config.env_http_headers.items():
        if var in os.environ:
            headers[header] = os.environ[var]
        else:
            logger.warning("MCP server %r: %s for header %s is not set", conn.name, var, header)
    if config.bearer_token_env_var:
        token = os.environ.get(config.bearer_token_env_var)
        if not token:
            raise MCPStartupError(f"bearer_token_env_var {config.bearer_token_env_var} is not set")
        headers["Authorization"] = f"Bearer {token}"
    from mol.runtime.mcp.sdk.oauth import auth_for
    from mol.runtime.mcp.sdk.urls import url_guard

    answers = conn.answers
    auth = None
    if config.oauth is not None and answers is not None:
        auth = auth_for(conn.name, config, answers.sign_in, answers.can_sign_in, conn.refuse)
    elif config.oauth is not None:
        auth = auth_for(conn.name, config, refused=conn.refuse)
    async def note_401(response: Any) -> None:
        if response.status_code == 401 and auth is None:
            conn.unauthorized = True

    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0), auth=auth,
                              event_hooks={"request": [url_guard(config.url)],
                                           "response": [note_401]})
    await stack.enter_async_context(http)
    return streamable_http_client(config.url, http_client=http)
