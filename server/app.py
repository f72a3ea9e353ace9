"""The OpenAI-compatible server: Starlette on uvicorn.

Routes: ``GET /health`` (no auth), ``GET /metrics`` (``metrics``), ``GET /v1/models`` and
``GET /v1/models/{id}``, ``POST /v1/chat/completions`` (``chat``), ``POST /v1/responses``
(``responses``), ``GET`` and ``DELETE /v1/responses/{id}``, ``GET
/v1/responses/{id}/input_items`` and ``POST /v1/responses/{id}/cancel`` (``stored``),
``GET /ui/{id}`` (the preview of a response's generated UI, ``genui``) and its modules
under ``/ui/assets/`` (no auth: static files).
Clients see one model, the artifact's ``[model] name``; the adapters too only with
``[server] expose_adapters``. Every other route needs the bearer key (``auth``). Turns run
in the background ``Runner``
(``runner``) and are checkpointed into the session store.

``create_app`` builds the ASGI app; its lifespan opens the runtime (plugins,
toolsets, engine) and the store, and on shutdown drains the turns in flight
for at most ``drain`` seconds. ``serve`` runs it on uvicorn, whose graceful
shutdown (SIGTERM, SIGINT) is bounded by the same time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mol.hcp.loader import Artifact
from mol.server.http.bodies import MAX_BODY
from mol.server.http.errors import ApiError

log = logging.getLogger("mol.server")


@dataclass
class ServerConfig:
    """How the server runs (the CLI fills it from flags and the environment)."""

    artifact: Artifact
    store_path: str
    """The session store: a SQLite file, or a store URL (``sqlite:///...``, ``postgresql://...``)."""
    api_key: bytes | None
    engine_url: str | None = None
    max_body: int = MAX_BODY
    max_turns: int = 64
    """Turns running at once; more wait in the queue."""
    queue: int | None = None
    """Turns that may wait for a slot (None: the artifact's ``[server] queue``); one more is
    refused with 429 and ``Retry-After``."""
    queue_wait: float | None = None
    """Seconds a turn may wait for a slot (None: the artifact's ``[server] queue_wait``)."""
    keepalive: float = 15.0
    """Seconds of quiet after which a streamed reply sends an SSE keep-alive comment."""
    deadline: float = 600.0
    """Seconds a turn may take before it is cancelled (504)."""
    drain: float = 10.0
    """Seconds turns in flight get to finish at shutdown."""
    elicitation_timeout: float = 300.0
    """Seconds a turn suspended on an MCP server's request for input waits for the client's
    ``mcp_elicitation`` answer, then declines (``mol.server.turns.elicitation``)."""
    max_connections: int = 512
    """Connections open at once; one more is answered 503 and closed."""
    header_timeout: float = 10.0
    """Seconds a client has to send a request's head (from connecting, or from the last
    response on a kept-alive connection, so idle connections close after it too)."""
    body_timeout: float = 30.0
    """Seconds a client has to send a request's body; 408 after."""
    plugins: Any = None
    engine: Any = None


def create_app(config: ServerConfig) -> Any:
    """The ASGI app: ``Idempotency`` inside the auth middleware (without a key,
    ``LoopbackOnly``)."""
    from mol.genui.web import asset_route
    from mol.server.api.chat import chat_completions
    from mol.server.api.genui import ui_page
    from mol.server.api.responses import create_response
    from mol.server.api.stored import (
        cancel_response,
        delete_response,
        get_response,
        input_items,
    )
    from mol.server.http.auth import BearerAuth, LoopbackOnly
    from mol.server.http.idempotency import Idempotency
    from mol.server.http.metrics import Counted, Metrics

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/models/{model_id:path}", model, methods=["GET"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/responses", create_response, methods=["POST"]),
        Route("/v1/responses/{response_id}", get_response, methods=["GET"]),
        Route("/v1/responses/{response_id}", delete_response, methods=["DELETE"]),
        Route("/v1/responses/{response_id}/input_items", input_items, methods=["GET"]),
        Route("/v1/responses/{response_id}/cancel", cancel_response, methods=["POST"]),
        Route("/ui/{response_id}", ui_page, methods=["GET"]),
        asset_route(),
    ]
    app = Starlette(routes=routes, lifespan=_lifespan(config),
                    exception_handlers={ApiError: _api_error, 404: _not_found,
                                        405: _not_allowed, Exception: _internal})
    app.state.config = config
    app.state.max_body = config.max_body
    app.state.body_timeout = config.body_timeout
    app.state.keepalive = config.keepalive
    app.state.models = served_models(config.artifact)
    app.state.adapters = frozenset(config.artifact.doc.adapters)
    app.state.metrics = counts = Metrics()
    kept = Idempotency(app, max_body=config.max_body, body_timeout=config.body_timeout)
    guarded = LoopbackOnly(kept) if config.api_key is None else BearerAuth(kept, config.api_key)
    return Counted(guarded, counts)


def _lifespan(config: ServerConfig) -> Any:
    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        from mol.runtime.app import open_runtime
        from mol.runtime.engine import preload
        from mol.runtime.sessions import open_store
        from mol.server.turns.runner import Runner

        await preload()
        serving = config.artifact.doc.server
        async with (
            open_store(config.store_path) as store,
            open_runtime(config.artifact, engine_url=config.engine_url,
                         plugins=config.plugins, engine=config.engine) as base,
            Runner(base, store, max_turns=config.max_turns, deadline=config.deadline,
                   drain=config.drain, lease=config.artifact.doc.session.lease,
                   queue=serving.queue if config.queue is None else config.queue,
                   queue_wait=serving.queue_wait if config.queue_wait is None
                   else config.queue_wait, metrics=app.state.metrics,
                   elicit_wait=config.elicitation_timeout) as runner,
        ):
            app.state.metrics.attach(runner)
            for session_id, index in store.interrupted:
                log.warning("session %s: turn %d was interrupted by a restart",
                            session_id, index)
            app.state.runner = runner
            yield

    return lifespan


async def health(request: Request) -> Response:
    """Whether the engine and the required MCP servers answer (no auth; names and states
    only, never error details)."""
    import httpx

    runner = getattr(request.app.state, "runner", None)
    base = getattr(runner, "base", None)
    url = getattr(getattr(base, "engine", None), "api_base", None)
    ok, detail = True, "not an HTTP engine"
    if url:
        try:
            async with httpx.AsyncClient(timeout=2.0) as client:
                answer = await client.get(url.rstrip("/") + "/models")
            ok, detail = answer.status_code < 500, f"HTTP {answer.status_code}"
        except httpx.HTTPError as exc:
            ok, detail = False, type(exc).__name__
    servers = [{"name": s.name, "state": s.state, "required": s.required}
               for toolset in getattr(base, "toolsets", [])
               for s in (toolset.status() if hasattr(toolset, "status") else [])]
    healthy = ok and all(s["state"] == "ready" for s in servers if s["required"])
    body = {"status": "ok" if healthy else "degraded", "engine": {"ok": ok, "detail": detail},
            "mcp_servers": servers}
    return JSONResponse(body, status_code=200 if healthy else 503)


async def metrics(request: Request) -> Response:
    """``GET /metrics``: the Prometheus text format (``mol.server.http.metrics``)."""
    body, kind = request.app.state.metrics.render()
    return Response(body, media_type=kind)


def served_models(artifact: Artifact) -> list[str]:
    """The model ids clients may name: the public model (it routes: route -> answer ->
    summary), then, with ``[server] expose_adapters``, each adapter (it pins the turn)."""
    doc = artifact.doc
    return [doc.model.name, *(doc.adapter_names if doc.server.expose_adapters else [])]


def _model_object(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": int(time.time()), "owned_by": "mol"}


async def models(request: Request) -> Response:
    """``GET /v1/models``: the public model (and the adapters, when exposed)."""
    data = [_model_object(name) for name in request.app.state.models]
    return JSONResponse({"object": "list", "data": data})


async def model(request: Request) -> Response:
    """``GET /v1/models/{id}``: one served model, or 404 ``model_not_found``."""
    name = request.path_params["model_id"]
    if name not in request.app.state.models:
        raise ApiError(404, f"the model {name!r} does not exist", param="model",
                       code="model_not_found")
    return JSONResponse(_model_object(name))


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return exc.response()


async def _not_found(request: Request, exc: Exception) -> Response:
    return ApiError(404, f"no route {request.url.path!r}").response()


async def _not_allowed(request: Request, exc: Exception) -> Response:
    return ApiError(405, f"method {request.method} is not allowed on "
                         f"{request.url.path!r}").response()


async def _internal(request: Request, exc: Exception) -> Response:
    log.exception("request failed")
    return ApiError(500, f"internal error: {type(exc).__name__}").response()


async def serve(config: ServerConfig, host: str = "127.0.0.1", port: int = 8200) -> None:
    """Run the server until SIGTERM/SIGINT; in-flight requests get ``drain`` seconds."""
    import signal
    import threading
    from contextlib import contextmanager

    import uvicorn

    from mol.server.http.auth import check_bind
    from mol.server.http.transport import uvicorn_config

    class Server(uvicorn.Server):
        """uvicorn's server, except that a drained shutdown on SIGTERM/SIGINT exits 0
        (uvicorn re-raises the signal after shutting down, so the process died by it)."""

        @contextmanager
        def capture_signals(self) -> Any:
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            signals = (signal.SIGINT, signal.SIGTERM)
            original = {sig: signal.signal(sig, self.handle_exit) for sig in signals}
            try:
                yield
            finally:
                for sig, handler in original.items():
                    signal.signal(sig, handler)

    check_bind(host, config.api_key)
    uv = uvicorn_config(create_app(config), config, host, port, log_level="info",
                        access_log=True)
    await Server(uv).serve()
