"""The one way mol starts an HTTP server: uvicorn, from ``mol serve`` to the scripted engine.

``serve`` runs an ASGI app until it is told to stop (``until``), or, in the main thread,
until SIGINT or SIGTERM: in-flight requests then get the graceful shutdown's time, and
the call returns normally (uvicorn itself re-raises the signal after shutting down, so
the process would die by it and exit non-zero). ``ready`` is set once the server
listens. ``run`` is the same for a program's main thread, with its own event loop.

The loop defaults to plain asyncio: uvicorn's ``auto`` picks uvloop when it is installed,
and uvloop breaks servers run outside the main thread (the scripted engine, tests).
``mol serve`` asks for uvloop itself, in its main thread only.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio


def config(app: Any, **options: Any) -> Any:
    """The ``uvicorn.Config`` serving ``app`` (``options`` are uvicorn's)."""
    import uvicorn

    options.setdefault("loop", "asyncio")
    return uvicorn.Config(app, **options)


async def serve(app: Any = None, *, sockets: list[Any] | None = None,
                ready: anyio.Event | None = None, until: anyio.Event | None = None,
                uvicorn_config: Any = None, **options: Any) -> None:
    """Serve ``app`` (or ``uvicorn_config``'s app) on ``sockets`` (or the configured host
    and port) until ``until`` is set, or a signal ends it (main thread only)."""
    server = _server(uvicorn_config or config(app, **options), ready, until)
    await server.serve(sockets=sockets)


def run(app: Any, **options: Any) -> None:
    """Serve ``app`` from a program's main thread until SIGINT or SIGTERM."""
    options.setdefault("loop", "auto")  # a program of its own: uvloop is welcome here
    _server(config(app, **options), None, None).run()


def _server(uv_config: Any, ready: anyio.Event | None, until: anyio.Event | None) -> Any:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, reporting readiness, stopping on an event when given, and
        ending a signalled shutdown normally."""

        async def startup(self, sockets: list[Any] | None = None) -> None:
            await super().startup(sockets=sockets)
            if ready is not None and not self.should_exit:
                ready.set()

        async def main_loop(self) -> None:
            if until is None:
                await super().main_loop()
                return
            await self.on_tick(0)  # sets the default headers once
            await until.wait()

        @contextmanager
        def capture_signals(self) -> Iterator[None]:
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

    return Server(uv_config)
