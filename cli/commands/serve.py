"""``mol serve``: the HTTP server of the OpenAI and Anthropic APIs (docs/server.md)."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from mol.cli.commands.common import add_engine_check_argument, add_hcp_argument


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mol serve``."""
    add_hcp_argument(parser)
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default: loopback)")
    parser.add_argument("--port", type=int, default=8200, help="port (default 8200; 0: any free)")
    parser.add_argument("--engine-url", help="engine base URL, overriding the artifact's "
                        "engine.api_base (also $MOL_ENGINE_URL)")
    add_engine_check_argument(parser)
    parser.add_argument("--max-turns", type=int, default=64,
                        help="turns running at once; more wait in the queue (default 64)")
    parser.add_argument("--queue", type=int, default=None,
                        help="turns that may wait for a slot; one more gets 429 (default: "
                        "the artifact's [server] queue, 512)")
    parser.add_argument("--queue-wait", type=float, default=None,
                        help="seconds a turn may wait for a slot, then 429 (default: the "
                        "artifact's [server] queue_wait, 60)")
    parser.add_argument("--deadline", type=float, default=600.0,
                        help="seconds a turn may take before it is cancelled (default 600)")
    parser.add_argument("--drain", type=float, default=10.0,
                        help="seconds turns in flight get to finish at shutdown (default 10)")
    parser.add_argument("--elicitation-timeout", type=float, default=300.0,
                        help="seconds a turn waits for the client's answer to an MCP "
                        "server's request for input, then declines it (default 300)")
    parser.add_argument("--max-body", type=int, default=4 * 1024 * 1024,
                        help="largest request body in bytes (default 4 MiB)")
    parser.add_argument("--max-connections", type=int, default=512,
                        help="connections open at once; more get 503 (default 512)")
    parser.add_argument("--header-timeout", type=float, default=10.0,
                        help="seconds a client has to send a request's head; idle "
                        "connections close after it too (default 10)")
    parser.add_argument("--body-timeout", type=float, default=30.0,
                        help="seconds a client has to send a request body (default 30)")
    parser.set_defaults(func=serve)


def serve(args: argparse.Namespace) -> int:
    """Run ``serve_async`` on uvloop when it is installed (the ``fast`` extra), else on
    asyncio's own loop. uvloop only ever runs here, in the process's main thread."""
    import threading

    import anyio

    from mol.server.http.transport import installed

    fast = installed("uvloop") and threading.current_thread() is threading.main_thread()
    return anyio.run(serve_async, args, backend="asyncio",
                     backend_options={"use_uvloop": fast})


async def serve_async(args: argparse.Namespace) -> int:
    """Load the artifact, check the key and bind address, and serve until SIGTERM."""
    import asyncio

    from mol.cli.commands.common import load_artifact
    from mol.core.errors import UsageError
    from mol.runtime.sessions import store_path, store_url_for
    from mol.runtime.sessions.postgres import redacted
    from mol.server import ServerConfig
    from mol.server import serve as run_server
    from mol.server.http.auth import check_bind, load_key
    from mol.server.http.transport import guarded_protocol

    for name in ("max_turns", "max_body", "max_connections"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1")
    for name in ("header_timeout", "body_timeout"):
        if getattr(args, name) <= 0:
            raise UsageError(f"--{name.replace('_', '-')} must be a positive number of seconds")
    if args.queue is not None and args.queue < 0:
        raise UsageError("--queue must be at least 0")
    if args.queue_wait is not None and args.queue_wait <= 0:
        raise UsageError("--queue-wait must be a positive number of seconds")
    artifact = load_artifact(args.hcp)
    key = load_key()
    check_bind(args.host, key)
    url = store_url_for(artifact)
    # A SQLite store is named by its file (and a bad URL refused here, before any start).
    path = url if url.startswith(("postgresql://", "postgres://")) else str(store_path(url))
    # mol's own log lines only: the root logger stays quiet so libraries (litellm) do not
    # log every request at INFO.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s:     %(name)s: %(message)s"))
    logger = logging.getLogger("mol")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    loop = type(asyncio.get_running_loop()).__module__.split(".")[0]
    http = guarded_protocol().__name__.removeprefix("Guarded").removesuffix("Protocol").lower()
    print(f"mol serve: {artifact.name} ({artifact.digest[:19]}), sessions in {redacted(path)}, "
          f"{'API key required' if key else 'NO API KEY (loopback only)'}, {loop} + {http}",
          file=sys.stderr, flush=True)
    await register_loras(artifact, args.engine_url)
    config = ServerConfig(artifact=artifact, store_path=path, api_key=key,
                          engine_url=args.engine_url, max_body=args.max_body,
                          max_turns=args.max_turns, queue=args.queue,
                          queue_wait=args.queue_wait, deadline=args.deadline, drain=args.drain,
                          elicitation_timeout=args.elicitation_timeout,
                          max_connections=args.max_connections,
                          header_timeout=args.header_timeout, body_timeout=args.body_timeout,
                          engine_check=not args.no_engine_check)
    await run_server(config, args.host, args.port)
    return 0


async def register_loras(artifact: Any, engine_url: str | None) -> None:
    """``engine.register_loras``: register the LoRAs the engine does not serve yet, before
    serving (one log line each); the engine's refusal stops ``mol serve``."""
    if not artifact.doc.engine.register_loras:
        return
    from mol.runtime import register_missing

    for name in await register_missing(artifact, engine_url):
        logging.getLogger("mol.serve").info("registered LoRA %s with the engine", name)
