"""Where an MCP connection may send requests: ``url_guard`` checks every request the
connection makes, the OAuth ones included (metadata, registration, token, and the
authorization URL a person is sent to): a URL whose host is private, link-local,
loopback or otherwise not public is refused unless the MCP server itself is on such an
address, and so is anything that is not http(s)."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import anyio

from mol.core.errors import MCPError


def _public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%")[0])
    return ip.is_global and not ip.is_multicast


async def _addresses(host: str) -> list[str]:
    try:
        return [str(ipaddress.ip_address(host))]
    except ValueError:
        pass
    try:
        infos = await anyio.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise MCPError(f"cannot resolve {host!r}: {exc}") from None
    return sorted({info[4][0] for info in infos})


async def is_local(url: str) -> bool:
    """Whether ``url``'s host is on a non-public address (loopback, private, link-local)."""
    host = urlsplit(url).hostname or ""
    return not all(_public(a) for a in await _addresses(host))


def url_guard(server_url: str) -> Callable[[Any], Awaitable[None]]:
    """An httpx2 request hook refusing non-public targets when the server is public."""
    decided: dict[str, bool] = {}

    async def check(request: Any) -> None:
        if "server" not in decided:
            decided["server"] = await is_local(server_url)
        if decided["server"]:
            return
        await check_url(str(request.url))

    return check


async def check_url(url: str) -> None:
    """Refuse ``url`` unless it is http(s) to public addresses only."""
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise MCPError(f"mol refused the URL {url!r}: not an http(s) URL")
    if not all(_public(a) for a in await _addresses(parts.hostname)):
        raise MCPError(f"mol refused the URL {url!r}: its host is not a public address, "
                       "and the MCP server is")
