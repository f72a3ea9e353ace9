"""The egress gateway: an HTTP(S) proxy that lets an ``allowlist`` sandbox reach only its list.

It runs in its own container, outside the sandbox (``mol.sandboxes.egress`` starts it):
attached to the sandbox's ``network`` and to an internal Docker network it shares only
with that sandbox, which has no other route out. The sandbox's ``HTTP_PROXY`` /
``HTTPS_PROXY`` point here. For each request (``CONNECT host:port``, or an absolute
``http://`` URL) it resolves the host itself, connects to the first address an
``egress_allow`` rule allows (``mol.hcp.egress.Destination.allows``: a host name only
to public addresses) and pipes the bytes; anything else is a ``403``. It connects to the
address it checked, so a name that resolves differently a moment later (DNS rebinding)
changes nothing.

The program is standard library only: ``program()`` is its source together with that of
``mol.hcp.egress``, run as ``python3 -c`` in the gateway container (any image with
Python 3.11 or later).
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from pathlib import Path
from urllib.parse import urlsplit

from mol.hcp.egress import Destination, parse_destination

PORT = 3128
"""Where the gateway listens (on the internal network, as host ``egress``)."""

MAX_HEAD = 16 * 1024
"""Largest request head a client may send."""

HEAD_TIMEOUT = 30.0
"""Seconds a client has to send its request head, and the gateway to connect."""

IDLE = 600.0
"""Seconds a tunnel may stay silent in both directions before it is closed."""

MAX_TUNNELS = 256
"""Connections served at once."""

HOP_HEADERS = (b"proxy-connection:", b"proxy-authorization:", b"connection:", b"keep-alive:")


def reply(status: str, text: str) -> bytes:
    """A complete plain-text response that ends the connection."""
    body = f"mol egress gateway: {text}\n".encode()
    return (f"HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {len(body)}\r\n"
            "connection: close\r\n\r\n").encode() + body


def destination(head: bytes) -> tuple[str, str, int, bytes | None]:
    """``(method, host, port, head to send upstream)`` of a request head; ``None`` for
    ``CONNECT`` (the client speaks first through the tunnel). ``ValueError`` if malformed."""
    line, _, rest = head.partition(b"\r\n")
    method, target, version = line.decode("latin-1").split(" ")
    if method == "CONNECT":
        host, _, port = target.rpartition(":")
        return method, host.strip("[]"), int(port), None
    url = urlsplit(target)
    if url.scheme != "http" or not url.hostname:
        raise ValueError("only CONNECT and http:// requests go through the gateway")
    path = (url.path or "/") + (f"?{url.query}" if url.query else "")
    kept = [h for h in rest.split(b"\r\n") if h and not h.lower().startswith(HOP_HEADERS)]
    upstream = f"{method} {path} {version}\r\n".encode() \
        + b"".join(h + b"\r\n" for h in kept) + b"connection: close\r\n\r\n"
    return method, url.hostname, url.port or 80, upstream


async def allowed_address(host: str, port: int, rules: list[Destination]) -> str | None:
    """The first address ``host`` resolves to that a rule allows on ``port``."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return None
    for *_, address in infos:
        if any(rule.allows(host, address[0], port) for rule in rules):
            return address[0]
    return None


async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Copy until end of stream or ``IDLE`` seconds without data."""
    try:
        while data := await asyncio.wait_for(source.read(65536), IDLE):
            sink.write(data)
            await sink.drain()
    except (TimeoutError, OSError):
        pass
    finally:
        sink.close()


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 rules: list[Destination], slots: asyncio.Semaphore) -> None:
    """One client connection: check its destination, then tunnel or refuse."""
    async with slots:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
            method, host, port, upstream = destination(head[:-2])
            address = await allowed_address(host, port, rules)
            if address is None:
                print(f"denied {method} {host}:{port}", file=sys.stderr, flush=True)
                writer.write(reply("403 Forbidden", f"{host}:{port} is not in the sandbox's "
                                   "egress_allow list"))
                return
            far_reader, far_writer = await asyncio.wait_for(
                asyncio.open_connection(address, port), HEAD_TIMEOUT)
            if upstream is None:
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                far_writer.write(upstream)
            await asyncio.gather(pipe(reader, far_writer), pipe(far_reader, writer))
        except (ValueError, UnicodeDecodeError, asyncio.LimitOverrunError,
                asyncio.IncompleteReadError):
            writer.write(reply("400 Bad Request", "not a proxy request"))
        except (TimeoutError, OSError):
            writer.write(reply("502 Bad Gateway", "the destination did not answer"))
        finally:
            writer.close()


async def serve(rules: list[Destination]) -> None:
    """Listen on ``PORT`` and say ``ready`` on stdout."""
    slots = asyncio.Semaphore(MAX_TUNNELS)
    server = await asyncio.start_server(
        lambda r, w: handle(r, w, rules, slots), "0.0.0.0", PORT, limit=MAX_HEAD)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> None:
    """``gateway RULES_JSON``: the ``egress_allow`` entries, as a JSON list."""
    asyncio.run(serve([parse_destination(entry) for entry in json.loads(argv[1])]))


def program() -> str:
    """This module and ``mol.hcp.egress`` as one self-contained script for ``python3 -c``."""
    from mol.hcp import egress

    parts = [Path(egress.__file__).read_text(), Path(__file__).read_text()]
    lines = [line for part in parts for line in part.splitlines()
             if not line.startswith(("from __future__", "from mol."))]
    return "\n".join(["from __future__ import annotations", *lines])


if __name__ == "__main__":
    main(sys.argv)
