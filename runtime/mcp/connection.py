"""One live connection to an MCP server, from its start to its teardown.

``Connection`` wraps the SDK client of one server (``lifecycle`` opens and
closes it): every request runs under ``tool_timeout_sec`` and fails at once
when the server dies meanwhile; change notifications of both protocol eras
(the 2026-07-28 stateless core's subscriptions, the handshake era's
notifications) reach the server's owner.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from mol.core import events as ev
from mol.core import tracing
from mol.core.errors import MCPError, MCPServerDied, MCPTimeout
from mol.runtime.mcp import sdk
from mol.runtime.mcp.process import ServerProcess

logger = logging.getLogger("mol.mcp")

_PAGE_CAP = 100
"""Most pages of a paginated listing read before giving up (a server paging forever)."""


class Connection:
    """A live session with one server; ``failure`` says why it ended, when it did."""

    def __init__(self, name: str, config: Any, answers: Any = None,
                 on_change: Callable[[Connection, str], Awaitable[None]] | None = None) -> None:
        self.name = name
        self.config = config
        self.answers = answers
        """The ``Answers`` to the server's requests (sampling, elicitation, roots, logs)."""
        self.on_change = on_change
        self.ended = anyio.Event()
        """Set once the connection's teardown finished."""
        self.unauthorized = False
        """An HTTP server answered 401 and no ``oauth`` is configured."""
        self.refusal: str | None = None
        """Why the last request went without the sign-in it needed (``refuse``)."""
        self.task_group: Any = None
        """The group of the connection's watchers (subscriptions)."""
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

    def refuse(self, reason: str) -> None:
        """A request goes without the sign-in it needed (nobody could sign in, or the person
        declined): ``reason`` is what its failure will say."""
        self.refusal = reason

    def unauthorized_reason(self) -> str | None:
        """Why requests fail when the server wants authorization mol was not given: a
        sign-in that could not be had (said once, by the request it failed), or no
        ``oauth`` configured."""
        if self.refusal is not None:
            reason, self.refusal = self.refusal, None
            return reason
        if not self.unauthorized:
            return None
        return (f"the server requires authorization (HTTP 401): configure "
                f"[mcp_servers.{self.name}] oauth and run 'mol mcp login {self.name}'")

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
            page = await self.request(fetch(cursor), f"{key.replace('_', '/')}/list")
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

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        """Call tool ``name`` under ``tool_timeout_sec``; returns the SDK's ``CallToolResult``.

        Progress notifications become ``tool_progress`` events of the call (through
        ``context.emit``) and never extend the deadline. On timeout, or when the
        turn is cancelled, the SDK sends ``notifications/cancelled`` for the
        request (it does so whenever a request is abandoned) and the session
        stays usable.
        """
        emit = getattr(context, "emit", None)

        async def progress(done: float, total: float | None, message: str | None) -> None:
            logger.debug("MCP %s/%s progress %s/%s %s", self.name, name, done, total, message or "")
            if emit is not None:
                await emit(ev.ToolProgress(context.adapter, context.call_id, name, done, total,
                                           message or ""))

        with tracing.span("mcp", server=self.name, tool=name, protocol=self.protocol_version,
                          transport="stdio" if self.config.command else "http") as span:
            result = await self.request(
                self.client.call_tool(name, arguments, progress_callback=progress),
                f"tool {name!r}")
            span.note(is_error=bool(getattr(result, "is_error", False)))
        return result

    async def list_resource_templates(self) -> list[Any]:
        """Every resource template of the server; empty without the resources capability."""
        if not self.capability("resources"):
            return []
        return await self._all_pages(
            lambda cursor: self.client.list_resource_templates(cursor=cursor), "resource_templates")

    async def complete(self, ref: dict[str, Any], argument: dict[str, str],
                       context: dict[str, str] | None = None) -> list[str]:
        """Completions of ``argument`` (``{"name", "value"}``) of a prompt or template ``ref``."""
        result = await self.request(sdk.complete(self.client, ref, argument, context),
                                    "completion/complete")
        return list(result.completion.values)

    async def ping(self) -> float:
        """Seconds a ``ping`` took (handshake era; a 2026-07-28 server is asked to discover)."""
        started = anyio.current_time()
        await self.request(sdk.ping(self.client, self.protocol_version), "ping")
        return anyio.current_time() - started

    async def subscribe(self, uri: str) -> None:
        """Have the server say when resource ``uri`` changes (``resources/updated``)."""
        resources = self.capability("resources")
        if not getattr(resources, "subscribe", False):
            raise MCPError(f"MCP server {self.name!r} does not offer resource subscriptions")
        if sdk.is_modern(self.protocol_version):
            await self.task_group.start(self._listen_resource, uri)
            return
        await self.request(sdk.subscribe(self.client, uri), f"resources/subscribe {uri}")

    async def opened(self) -> None:
        """After the handshake: ask for the configured log level (handshake era)."""
        if self.capability("logging") and not sdk.is_modern(self.protocol_version):
            try:
                await self.request(sdk.set_log_level(self.client, self.config.log_level),
                                   "logging/setLevel")
            except MCPError as exc:
                logger.info("MCP server %r: logging/setLevel failed: %s", self.name, exc)

    async def roots_changed(self) -> None:
        """Tell the server the roots changed (handshake era; 2026-07-28 asks each time)."""
        if not sdk.is_modern(self.protocol_version) and self.alive:
            await sdk.roots_changed(self.client)

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
            with anyio.fail_after(limit) as deadline, scope:
                if self.answers is not None:
                    self.answers.timed(deadline)  # stopped while a person answers the server
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
            refused = self.unauthorized_reason()
            raise MCPError(f"MCP server {self.name!r}: {what} "
                           f"{f'failed: {refused}' if refused else failure.message}") from exc
        finally:
            self._inflight.discard(scope)
        raise self._died(what)  # ``fail`` cancelled the request

    def _died(self, what: str) -> MCPServerDied:
        reason = self.failure or "the connection closed"
        return MCPServerDied(f"MCP server {self.name!r} failed during {what}: {reason}")

    # -- change notifications --------------------------------------------------

    async def on_message(self, message: Any) -> None:
        """SDK message handler: list_changed, resources/updated (handshake era) and
        transport errors."""
        what = sdk.notice(message)
        if what == "tools":
            self._signal_change()
        elif what is not None and self.on_change is not None:
            await self.on_change(self, what)
        elif isinstance(message, Exception):
            # Only the HTTP transport reports errors this way: treat it like a dead
            # process (fail what is in flight; the next call reconnects).
            self.fail(self.unauthorized_reason() or
                      f"transport error: {type(message).__name__}: {message}")

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

    async def _listen_resource(self, uri: str, *, task_status: Any = anyio.TASK_STATUS_IGNORED
                               ) -> None:
        try:
            async with self.client.listen(resource_subscriptions=[uri]) as subscription:
                task_status.started()
                async for event in subscription:
                    if self.on_change is not None:
                        await self.on_change(self, sdk.event_kind(event) or f"resource:{uri}")
        except Exception as exc:
            logger.info("MCP server %r: subscription to %s ended: %s", self.name, uri, exc)
            task_status.started()

    async def _listen(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        started = False
        try:
            async with self.client.listen(tools_list_changed=True, prompts_list_changed=True,
                                          resources_list_changed=True) as subscription:
                task_status.started()
                started = True
                async for event in subscription:
                    what = sdk.event_kind(event)
                    if what == "tools":
                        self._signal_change()
                    elif what and self.on_change is not None:
                        await self.on_change(self, what)
        except Exception as exc:  # a lost subscription must not end the connection
            logger.info("MCP server %r: change subscription ended: %s", self.name, exc)
            if not started:
                task_status.started()
