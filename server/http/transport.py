"""The HTTP transport of ``mol serve``: uvicorn, with bounds a slow or greedy client meets
before any authentication.

- at most ``max_connections`` connections at once: one more is answered ``503`` and
  closed at once;
- a request's head (request line and headers) must arrive within ``header_timeout``
  seconds of the connection opening, or of the previous response on a kept-alive one; a
  byte now and then buys no time. Past it the connection is closed (``408`` when part
  of a head had arrived), so an idle connection is closed too;
- a request's body must arrive within ``body_timeout`` seconds (``read_body`` in
  ``mol.server.http.bodies``: ``408``);
- a WebSocket (``GET /v1/responses`` upgraded) counts as a connection; its head deadline
  ends with the upgrade (its protocol pings an idle peer), and one message may be at most
  ``max_body`` bytes (a larger one closes it with 1009).

The guards are a mixin over uvicorn's HTTP protocol (``uvicorn.Config(http=...)``), the
only place that sees a connection before a request exists. The protocol is httptools (a C
parser, the ``fast`` extra) when it is installed, else h11 (pure Python); the guards behave
the same on both. The event loop is not chosen here: whoever runs the server does
(``mol serve`` runs uvloop when installed, in its main thread only), so ``loop`` defaults to
``"asyncio"`` for a server run in a thread.
"""

from __future__ import annotations

import asyncio
import importlib.util
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol


def _plain(status: str, text: str, *headers: str) -> bytes:
    """A complete ``connection: close`` response written straight to the transport."""
    head = [f"HTTP/1.1 {status}", "content-type: text/plain", f"content-length: {len(text)}",
            *headers, "connection: close"]
    return ("\r\n".join(head) + "\r\n\r\n" + text).encode()


REFUSED = _plain("503 Service Unavailable", "too many connections", "retry-after: 1")
TIMED_OUT = _plain("408 Request Timeout", "the request head was too slow")


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (without importing it)."""
    return importlib.util.find_spec(module) is not None


class Guards:
    """A connection limit and a deadline for request heads, over a uvicorn HTTP protocol
    (its ``connections``, ``cycle``, ``loop`` and ``transport``)."""

    max_connections = 512
    header_timeout = 10.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_started = False
        if len(self.connections) > self.max_connections:
            transport.write(REFUSED)
            transport.close()
            return
        self._arm()

    def _arm(self) -> None:
        self._disarm()
        self._head_started = False
        self._head_timer = self.loop.call_later(self.header_timeout, self._head_too_slow)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            if self._head_started:
                self.transport.write(TIMED_OUT)
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        self._head_started = self._head_started or bool(data)
        cycle = self.cycle
        super().data_received(data)
        if self.cycle is not cycle:  # a whole head arrived: the request has begun
            self._disarm()

    def handle_websocket_upgrade(self, *event: Any) -> None:
        self._disarm()  # the connection is a WebSocket's now: its protocol keeps it alive
        super().handle_websocket_upgrade(*event)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()  # the next request's head (or idleness) on a kept-alive connection

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


class GuardedH11Protocol(Guards, H11Protocol):
    """uvicorn's h11 protocol with the guards."""


def guarded_protocol(http: str | None = None) -> type:
    """The guarded protocol class for ``http`` ("h11", "httptools"; None: httptools when
    installed)."""
    if http is None:
        http = "httptools" if installed("httptools") else "h11"
    if http == "h11":
        return GuardedH11Protocol
    if http != "httptools":
        raise ValueError(f"unknown HTTP protocol {http!r}; use h11 or httptools")
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    return type("GuardedHttpToolsProtocol", (Guards, HttpToolsProtocol), {
        "__doc__": "uvicorn's httptools protocol with the guards."})


def uvicorn_config(app: Any, config: Any, host: str, port: int, *, http: str | None = None,
                   **options: Any) -> Any:
    """The ``uvicorn.Config`` serving ``app`` with ``config``'s (a ``ServerConfig``) limits,
    on ``http`` (``guarded_protocol``)."""
    from mol.runtime import serving

    base = guarded_protocol(http)
    protocol = type(base.__name__, (base,), {
        "max_connections": config.max_connections, "header_timeout": config.header_timeout})
    options.setdefault("timeout_graceful_shutdown", config.drain)
    return serving.config(app, host=host, port=port, http=protocol, lifespan="on",
                          server_header=False, ws="websockets-sansio",
                          ws_max_size=config.max_body, **options)
