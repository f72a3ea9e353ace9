"""``GET /metrics``: what the server does, in the Prometheus text format.

The only module that imports ``prometheus_client`` (it raises nothing to translate). Each
app has its own registry, so several servers in one process (the tests) count apart:

- ``mol_http_requests_total{route, status}``: every answered request (and WebSocket
  handshake), by route template (``other`` for paths no route matched, e.g. refused before
  routing);
- ``mol_hop_seconds{hop, adapter}``: latency of the route and summary hops (their model
  call) and of the answer hop (from the route decision to the answer or the client's tool
  calls, tools included);
- ``mol_route_decisions_total{adapter, how}`` (``routed``, ``fallback``, ``pinned``) and
  ``mol_route_fallbacks_total{cause}`` (``router``: no valid label; ``unavailable``: the
  engine had not loaded the routed adapter);
- ``mol_route_speculations_total{adapter, held}``: answers started ahead of the route on
  the conversation's last adapter (``[router] speculate = "sticky"``), by whether they
  became the turn's answer (``true``) or were cancelled (``false``);
- ``mol_engine_errors_total{hop}``: engine failures, recovered (``route``, ``answer``,
  ``summary``) or failing the turn (``turn``);
- ``mol_prompt_tokens_total`` / ``mol_cached_prompt_tokens_total`` and their ratio
  ``mol_cached_token_ratio``, by adapter (the engine's prefix cache at work);
- ``mol_tool_calls_total{source}`` and ``mol_tool_seconds{source}``: tool calls by where the
  tool comes from (``plugin``, ``mcp``, ``builtin``, or ``client`` for calls the client runs);
- ``mol_queue_depth`` and ``mol_turns_running``: admission right now.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from mol.core import events as ev

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                   120.0, 300.0)


class Metrics:
    """The server's counters, histograms and gauges, in a registry of its own."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = reg = CollectorRegistry()
        self.requests = Counter("mol_http_requests", "HTTP requests answered",
                                ["route", "status"], registry=reg)
        self.hops = Histogram("mol_hop_seconds", "Latency of a turn's hops",
                              ["hop", "adapter"], buckets=LATENCY_BUCKETS, registry=reg)
        self.decisions = Counter("mol_route_decisions", "Route decisions", ["adapter", "how"],
                                 registry=reg)
        self.fallbacks = Counter("mol_route_fallbacks", "Turns answered by a fallback adapter",
                                 ["cause"], registry=reg)
        self.speculations = Counter("mol_route_speculations", "Answers started ahead of the "
                                    "route on the last adapter", ["adapter", "held"],
                                    registry=reg)
        self.engine_errors = Counter("mol_engine_errors", "Engine failures", ["hop"],
                                     registry=reg)
        self.prompt = Counter("mol_prompt_tokens", "Prompt tokens sent", ["adapter"],
                              registry=reg)
        self.cached = Counter("mol_cached_prompt_tokens", "Prompt tokens the engine served "
                              "from its prefix cache", ["adapter"], registry=reg)
        self.ratio = Gauge("mol_cached_token_ratio", "Cached prompt tokens over prompt tokens",
                           ["adapter"], registry=reg)
        self.tools = Counter("mol_tool_calls", "Tool calls", ["source"], registry=reg)
        self.tool_seconds = Histogram("mol_tool_seconds", "Tool call durations", ["source"],
                                      buckets=LATENCY_BUCKETS, registry=reg)
        self.queue = Gauge("mol_queue_depth", "Turns waiting for a slot", registry=reg)
        self.running = Gauge("mol_turns_running", "Turns holding a slot", registry=reg)
        self._tokens: dict[str, list[int]] = {}
        self.source_of: Callable[[str], str] = lambda name: "builtin"
        """Where a runtime tool comes from, by name (set by ``attach``)."""

    def attach(self, runner: Any) -> None:
        """Count ``runner``'s turns: its admission at each scrape, its plugins' tools by
        source."""
        admission, plugin_tools = runner.admission, runner.runtime.plugins.tools
        self.queue.set_function(lambda: admission.waiting)
        self.running.set_function(lambda: admission.running)

        def source_of(name: str) -> str:
            tool = plugin_tools.get(name)
            if tool is not None:
                return str(getattr(tool, "source", "builtin")).split(":", 1)[0]
            return "mcp" if name.startswith("mcp__") else "builtin"

        self.source_of = source_of

    def render(self) -> tuple[bytes, str]:
        """The text exposition and its content type."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    def engine_error(self, exc: Exception) -> None:
        """An engine failure that failed a turn."""
        self.engine_errors.labels(hop="turn").inc()

    def turn(self) -> Callable[[ev.Event], None]:
        """An observer of one turn's events."""
        return TurnMeter(self, self.source_of)

    def tokens(self, adapter: str, usage: dict[str, Any]) -> None:
        """Count a model call's prompt tokens and those served from the prefix cache."""
        prompt, cached = usage.get("prompt_tokens") or 0, usage.get("cached_tokens") or 0
        self.prompt.labels(adapter=adapter).inc(prompt)
        self.cached.labels(adapter=adapter).inc(cached)
        totals = self._tokens.setdefault(adapter, [0, 0])
        totals[0] += prompt
        totals[1] += cached
        if totals[0]:
            self.ratio.labels(adapter=adapter).set(totals[1] / totals[0])


class TurnMeter:
    """Counts one turn's events into ``Metrics``."""

    def __init__(self, metrics: Metrics, source_of: Callable[[str], str]) -> None:
        self.metrics, self.source_of = metrics, source_of
        self.decided: float | None = None
        self.decisions = 0
        self.tools: dict[str, float] = {}

    def __call__(self, event: ev.Event) -> None:
        m = self.metrics
        if isinstance(event, ev.RouteDecided):
            self.decisions += 1
            self.decided = time.monotonic()
            m.decisions.labels(adapter=event.adapter, how=event.how).inc()
            if event.how == ev.FALLBACK:
                m.fallbacks.labels(cause="router" if self.decisions == 1
                                   else "unavailable").inc()
        elif isinstance(event, ev.Speculated):
            m.speculations.labels(adapter=event.adapter, held=str(event.held).lower()).inc()
        elif isinstance(event, ev.ModelCalled):
            if event.purpose in ("route", "summary"):
                m.hops.labels(hop=event.purpose, adapter=event.adapter).observe(event.duration)
            m.tokens(event.adapter, event.usage)
        elif isinstance(event, ev.Answered | ev.ClientToolsRequested):
            if self.decided is not None and event.adapter:
                m.hops.labels(hop="answer", adapter=event.adapter).observe(
                    time.monotonic() - self.decided)
            if isinstance(event, ev.ClientToolsRequested):
                m.tools.labels(source="client").inc(len(event.calls))
        elif isinstance(event, ev.ToolCalled):
            self.tools[event.call_id] = time.monotonic()
        elif isinstance(event, ev.ToolReturned):
            source = self.source_of(event.name)
            m.tools.labels(source=source).inc()
            started = self.tools.pop(event.call_id, None)
            if started is not None:
                m.tool_seconds.labels(source=source).observe(time.monotonic() - started)
        elif isinstance(event, ev.Failed) and event.where in ("route", "answer", "summary"):
            m.engine_errors.labels(hop=event.where).inc()


STATUS_OF = {"websocket.accept": 101, "websocket.close": 403}
"""A WebSocket's status by the app's first answer to its handshake (a close before any
accept refuses it, as uvicorn answers: 403)."""


class Counted:
    """ASGI middleware counting every HTTP response (and WebSocket handshake: 101 when
    accepted) by route template and status."""

    def __init__(self, app: Any, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        status = {"code": 0}

        async def counting(message: dict[str, Any]) -> None:
            kind = message["type"]
            if not status["code"]:
                if kind in ("http.response.start", "websocket.http.response.start"):
                    status["code"] = message["status"]
                elif kind in STATUS_OF:
                    status["code"] = STATUS_OF[kind]
            await send(message)

        try:
            await self.app(scope, receive, counting)
        finally:
            route = getattr(scope.get("route"), "path", None) or "other"
            self.metrics.requests.labels(route=route, status=str(status["code"] or 500)).inc()



async def metrics(request: Any) -> Any:
    """``GET /metrics``: the Prometheus text format."""
    from starlette.responses import Response

    body, kind = request.app.state.metrics.render()
    return Response(body, media_type=kind)
