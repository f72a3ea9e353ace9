"""The OpenAI- and Anthropic-compatible server: Starlette on uvicorn, composed from its
three rooms.

Routes: ``GET /health`` (no auth, ``http.health``), ``GET /metrics`` (``http.metrics``),
``GET /v1/models`` and ``GET /v1/models/{id}`` (``api.models``), ``POST
/v1/chat/completions`` (``api.chat``), ``POST /v1/messages`` and ``POST
/v1/messages/count_tokens`` (``api.anthropic``), ``POST /v1/responses`` (``api.responses``),
``GET /v1/responses`` upgraded to a WebSocket (``api.sockets``), ``GET`` and ``DELETE
/v1/responses/{id}``, ``GET /v1/responses/{id}/input_items`` and
``POST /v1/responses/{id}/cancel`` (``api.stored``), ``GET /ui/{id}`` (the preview of a
response's generated UI, ``api.genui``) and its modules under ``/ui/assets/`` (no auth:
static files). Clients see one model, the artifact's ``[model] name``; the adapters too
only with ``[server] expose_adapters``. Every other route needs the API key
(``http.auth``). Turns run in the background ``Runner`` (``turns.runner``) and are
checkpointed into the session store.

``create_app`` builds the ASGI app; its lifespan opens the runtime (plugins,
toolsets, engine) and the store, checks that the engine serves every adapter
(``engine_check``: a start that fails there makes ``serve`` raise the reason), and on
shutdown drains the turns in flight for at most ``drain`` seconds. ``serve`` runs it on uvicorn (``mol.runtime.serving``),
whose graceful shutdown (SIGTERM, SIGINT) is bounded by the same time.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute

from mol.core.errors import MolError
from mol.hcp.loader import Artifact
from mol.server.http.bodies import MAX_BODY
from mol.server.http.errors import ApiError, api_error

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
    engine_check: bool = False
    """Refuse to start when the engine does not serve every adapter (missing, or on a
    foreign base: ``mol.runtime.require_served``); ``mol serve`` sets it unless
    ``--no-engine-check``."""
    start_failure: MolError | None = field(default=None, repr=False, compare=False)
    """Why the start failed, when it did (set by the start, raised by ``serve``)."""


def create_app(config: ServerConfig) -> Any:
    """The ASGI app: ``Idempotency`` inside the auth middleware (without a key,
    ``LoopbackOnly``), inside the request spans (``Traced``, when the runtime traces),
    inside the metrics' count."""
    from mol.genui.web import asset_route
    from mol.server.api.anthropic.route import count_tokens, create_message
    from mol.server.api.anthropic.thinking import Signer
    from mol.server.api.chat import chat_completions
    from mol.server.api.compact import compact_response
    from mol.server.api.compaction import secret_for
    from mol.server.api.genui import ui_page
    from mol.server.api.models import ServedModels, model, models
    from mol.server.api.responses import create_response
    from mol.server.api.sockets import responses_socket
    from mol.server.api.stored import (
        cancel_response,
        delete_response,
        get_response,
        input_items,
    )
    from mol.server.http.auth import BearerAuth, LoopbackOnly
    from mol.server.http.health import health
    from mol.server.http.idempotency import Idempotency
    from mol.server.http.metrics import Counted, Metrics, metrics
    from mol.server.http.tracing import Traced

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/models/{model_id:path}", model, methods=["GET"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/messages", create_message, methods=["POST"]),
        Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
        Route("/v1/responses", create_response, methods=["POST"]),
        Route("/v1/responses/compact", compact_response, methods=["POST"]),
        WebSocketRoute("/v1/responses", responses_socket),
        Route("/v1/responses/{response_id}", get_response, methods=["GET"]),
        Route("/v1/responses/{response_id}", delete_response, methods=["DELETE"]),
        Route("/v1/responses/{response_id}/input_items", input_items, methods=["GET"]),
        Route("/v1/responses/{response_id}/cancel", cancel_response, methods=["POST"]),
        Route("/ui/{response_id}", ui_page, methods=["GET"]),
        asset_route(),
    ]
    app = Starlette(routes=routes, lifespan=_lifespan(config),
                    exception_handlers={ApiError: _api_error, MolError: _api_error,
                                        404: _not_found, 405: _not_allowed,
                                        Exception: _internal})
    app.state.config = config
    app.state.max_body = config.max_body
    app.state.body_timeout = config.body_timeout
    app.state.keepalive = config.keepalive
    app.state.compaction_secret = secret_for(config.api_key)
    app.state.models = ServedModels(config.artifact)
    app.state.adapters = frozenset(config.artifact.doc.adapters)
    app.state.signer = Signer(config.api_key)
    app.state.metrics = counts = Metrics()
    kept = Idempotency(app, max_body=config.max_body, body_timeout=config.body_timeout)
    guarded = LoopbackOnly(kept) if config.api_key is None else BearerAuth(kept, config.api_key)
    return _QuietStart(Counted(Traced(guarded, app.state), counts), config)


class _QuietStart:
    """The app, with a start that fails on a ``MolError`` (an adapter the engine does not
    serve) reported to uvicorn in its one line rather than as a traceback: the error is
    what the operator reads, not where it was raised."""

    def __init__(self, app: Any, config: ServerConfig) -> None:
        self.app, self.config = app, config

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            return await self.app(scope, receive, send)

        async def sending(message: Any) -> None:
            failure = self.config.start_failure
            if message.get("type") == "lifespan.startup.failed" and failure is not None:
                message = {**message, "message": str(failure)}
            await send(message)

        await self.app(scope, receive, sending)


def _lifespan(config: ServerConfig) -> Any:
    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        from mol.runtime import open_runtime, open_store, preload

        await preload()
        async with (
            open_store(config.store_path) as store,
            open_runtime(config.artifact, engine_url=config.engine_url,
                         plugins=config.plugins, engine=config.engine) as runtime,
        ):
            # mol serve registered the missing LoRAs before (engine.register_loras).
            await _engine_checked(config, runtime)
            async with _runner(config, app, runtime, store) as runner:
                app.state.metrics.attach(runner)
                app.state.tracer = runtime.tracer
                for session_id, index in store.interrupted:
                    log.warning("session %s: turn %d was interrupted by a restart",
                                session_id, index)
                app.state.runner = runner
                yield

    return lifespan


async def _engine_checked(config: ServerConfig, runtime: Any) -> None:
    """The adapter check at the start (``config.engine_check``). A missing or foreign
    adapter fails the start; ``serve`` raises it once uvicorn has given up."""
    from mol.runtime import require_served

    if config.engine_check:
        try:
            await require_served(config.artifact, runtime.engine, runtime.windows)
        except MolError as exc:
            config.start_failure = exc
            raise


def _runner(config: ServerConfig, app: Starlette, runtime: Any, store: Any) -> Any:
    """The ``Runner`` of the server's turns."""
    from mol.server.turns.runner import Runner

    serving = config.artifact.doc.server
    return Runner(runtime, store, max_turns=config.max_turns, deadline=config.deadline,
                  drain=config.drain, lease=config.artifact.doc.session.lease,
                  queue=serving.queue if config.queue is None else config.queue,
                  queue_wait=serving.queue_wait if config.queue_wait is None
                  else config.queue_wait, metrics=app.state.metrics,
                  elicit_wait=config.elicitation_timeout)


async def _api_error(request: Request, exc: Exception) -> Response:
    """An ``ApiError`` a route raised, or a ``MolError`` the turn room raised at its start
    (``api_error`` decides its status)."""
    return api_error(exc).response(request.scope)


async def _not_found(request: Request, exc: Exception) -> Response:
    return ApiError(404, f"no route {request.url.path!r}").response(request.scope)


async def _not_allowed(request: Request, exc: Exception) -> Response:
    return ApiError(405, f"method {request.method} is not allowed on "
                         f"{request.url.path!r}").response(request.scope)


async def _internal(request: Request, exc: Exception) -> Response:
    log.exception("request failed")
    return ApiError(500, f"internal error: {type(exc).__name__}").response(request.scope)


async def serve(config: ServerConfig, host: str = "127.0.0.1", port: int = 8200) -> None:
    """Run the server until SIGTERM/SIGINT; in-flight requests get ``drain`` seconds."""
    from mol.runtime import serving
    from mol.server.http.auth import check_bind
    from mol.server.http.transport import uvicorn_config

    check_bind(host, config.api_key)
    try:
        await serving.serve(uvicorn_config=uvicorn_config(create_app(config), config, host,
                                                          port, log_level="info",
                                                          access_log=True))
    except SystemExit:  # uvicorn's exit when the start failed: say why, as mol does
        if config.start_failure is not None:
            raise config.start_failure from None
        raise
