"""Tracing of HTTP requests: a W3C ``traceparent`` continued, a ``traceresponse`` answered.

When the runtime traces (``mol.runtime.tracing``), each HTTP request but the health and
metrics probes and the preview's static modules is a server span: the child of the
client's span when the request carries a ``traceparent`` header, else a root. It is current
while the request is handled, so the turn it starts (``Runner.start`` carries it into the
turn's task) is its child; the response names it in a ``traceresponse`` header (W3C Trace
Context Level 2: ``00-<trace id>-<the server's span id>-<flags>``), so a client that sent
no ``traceparent`` still learns which trace its turn is in. WebSocket connections are not
spans (a connection lasts many turns; each turn is a root of its own). When nothing
traces, a request costs one attribute lookup here.
"""

from __future__ import annotations

from typing import Any

from mol.core import tracing

TRACEPARENT = b"traceparent"
TRACERESPONSE = b"traceresponse"
UNTRACED = ("/health", "/metrics")
"""Probes polled every few seconds: spans of them would bury the turns."""
UNTRACED_PREFIXES = ("/ui/assets/",)


class Traced:
    """ASGI middleware: each traced request is a ``request`` span of the runtime's tracer
    (``state.tracer``, set once the lifespan opened the runtime)."""

    def __init__(self, app: Any, state: Any) -> None:
        self.app, self.state = app, state

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        tracer = getattr(self.state, "tracer", None)
        path = scope.get("path", "")
        if (tracer is None or scope["type"] != "http" or path in UNTRACED
                or path.startswith(UNTRACED_PREFIXES)):
            await self.app(scope, receive, send)
            return
        parent = next((value.decode("latin-1") for name, value in scope.get("headers", ())
                       if name == TRACEPARENT), None)
        status = {"code": 500}
        with tracing.root(tracer, "request", parent=parent, method=scope.get("method", ""),
                          path=path) as span:
            header = span.header.encode("latin-1")

            async def answering(message: dict[str, Any]) -> None:
                if message["type"] == "http.response.start":
                    status["code"] = message["status"]
                    message = {**message, "headers": [*message.get("headers", ()),
                                                      (TRACERESPONSE, header)]}
                await send(message)

            try:
                await self.app(scope, receive, answering)
            finally:
                span.note(status=status["code"])
