"""API-key authentication for every route but ``GET /health`` and the GenUI preview's
static modules (``/ui/assets/``), HTTP requests and WebSocket handshakes alike, and the
bind rules.

The key lives in the file ``MOL_API_KEY_FILE`` names (a warning when others may read
it). A client sends it as ``Authorization: Bearer <key>`` (OpenAI clients) or
``x-api-key: <key>`` (Anthropic clients); it is compared in constant time
(``hmac.compare_digest``) before any routing, so every method and path variant (trailing
slashes, HEAD, OPTIONS, unknown paths) answers 401 without a valid key, never 404 or 405.
Without a key file the server refuses to start unless ``MOL_ALLOW_UNAUTHENTICATED=1``,
and then only on loopback; a web page could still reach a loopback server, so
``LoopbackOnly`` then refuses any ``Host`` but a loopback one (DNS rebinding), any foreign
``Origin`` (a page may open a WebSocket to any host) and any POST body that is not
``application/json`` (a cross-site form or ``no-cors`` fetch needs no preflight). The key
never reaches a log line, an error message or the session store.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import stat
from pathlib import Path
from typing import Any

from mol.core.errors import ServerError
from mol.core.hosts import loopback_host
from mol.server.http.errors import ApiError

KEY_FILE_ENV = "MOL_API_KEY_FILE"
UNAUTHENTICATED_ENV = "MOL_ALLOW_UNAUTHENTICATED"
OPEN_PATHS = frozenset({"/health"})
OPEN_PREFIXES = ("/ui/assets/",)
"""The GenUI preview's modules: the same static files for everyone (React, the A2UI
renderer), which a client showing the preview page in a frame cannot send the key for."""

log = logging.getLogger("mol.server")


def derived_secret(api_key: bytes | None, purpose: bytes) -> bytes:
    """A secret for one ``purpose`` (the tokens or signatures mol hands clients), derived
    from the API key so that every replica sharing the key accepts every other's. Without
    a key (loopback only) it comes from ``purpose`` alone: what it signs then survives a
    restart and catches changes, not forgeries by whoever can reach the server anyway."""
    return hashlib.sha256(purpose + b"\0" + (api_key or b"")).digest()


def load_key(environ: dict[str, str] | None = None) -> bytes | None:
    """The API key from ``$MOL_API_KEY_FILE``; None only when unauthenticated mode is on."""
    environ = dict(os.environ) if environ is None else environ
    path = environ.get(KEY_FILE_ENV)
    if not path:
        if environ.get(UNAUTHENTICATED_ENV) == "1":
            return None
        raise ServerError(f"no API key: set {KEY_FILE_ENV} to a file holding the key, or "
                          f"{UNAUTHENTICATED_ENV}=1 to serve without one (loopback only)")
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
        key = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ServerError(f"{KEY_FILE_ENV}={path}: cannot read the key file: "
                          f"{type(exc).__name__}") from None
    if not key:
        raise ServerError(f"{KEY_FILE_ENV}={path}: the key file is empty")
    if mode & 0o077:
        log.warning("the API key file %s has mode %o: other users may read the key; "
                    "chmod 600 it", path, mode)
    return key.encode()


def check_bind(host: str, key: bytes | None) -> None:
    """Refuse a non-loopback bind address when serving without a key."""
    if key is not None:
        return
    if not loopback_host(host):
        raise ServerError(f"refusing to serve without an API key on {host!r}: "
                          f"{UNAUTHENTICATED_ENV}=1 allows loopback addresses only "
                          "(127.0.0.1, ::1)")


SCOPES = ("http", "websocket")
"""The connections the guards check (lifespan events pass)."""


def _open(scope: dict[str, Any]) -> bool:
    """Whether the request needs no key: ``/health``, or reading a preview module."""
    path = scope["path"]
    return scope["type"] == "http" and (path in OPEN_PATHS or (
        path.startswith(OPEN_PREFIXES) and ".." not in path
        and scope["method"] in ("GET", "HEAD", "OPTIONS")))


async def refuse(error: ApiError, scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answer ``error`` instead of the app: an HTTP response, or a WebSocket handshake
    refused with it (uvicorn sends the response; a server without that extension, 403)."""
    if scope["type"] == "http":
        await error.response(scope)(scope, receive, send)
        return
    if "websocket.http.response" not in scope.get("extensions", {}):
        await send({"type": "websocket.close", "code": 1008})
        return
    response = error.response(scope)
    await send({"type": "websocket.http.response.start", "status": response.status_code,
                "headers": response.raw_headers})
    await send({"type": "websocket.http.response.body", "body": response.body})


class BearerAuth:
    """ASGI middleware: 401 (in the shape the request speaks) unless the key matches."""

    def __init__(self, app: Any, key: bytes | None) -> None:
        self.app = app
        self.key = key

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in SCOPES or self.key is None or _open(scope):
            await self.app(scope, receive, send)
            return
        if self._authorized(scope):
            await self.app(scope, receive, send)
            return
        await refuse(ApiError(401, "missing or invalid API key: send 'Authorization: Bearer "
                              "<key>' or 'x-api-key: <key>'", code="invalid_api_key",
                              headers={"WWW-Authenticate": "Bearer"}), scope, receive, send)

    def _authorized(self, scope: dict[str, Any]) -> bool:
        """One ``Authorization: Bearer`` or one ``x-api-key`` header (or one of each) with
        the key; a header sent twice fails."""
        assert self.key is not None
        bearers = [v for k, v in scope["headers"] if k == b"authorization"]
        keys = [v for k, v in scope["headers"] if k == b"x-api-key"]
        if len(bearers) > 1 or len(keys) > 1:
            return False
        given = [value.strip() for value in keys]
        for value in bearers:
            scheme, _, token = value.partition(b" ")
            given.append(token.strip() if scheme.lower() == b"bearer" else b"")
        # Compare always, even an empty key, so timing says nothing about the key.
        matches = [hmac.compare_digest(value, self.key) for value in given or [b""]]
        return any(matches)


class LoopbackOnly:
    """ASGI middleware for a server without a key: only local clients, only JSON bodies.

    403 unless ``Host`` is ``localhost`` or a loopback address (with any port) and
    ``Origin``, when sent, is ``http(s)://`` one of those; 415 for a POST whose body is
    not ``application/json``.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in SCOPES:
            await self.app(scope, receive, send)
            return
        error = _foreign(scope)
        if error is None:
            await self.app(scope, receive, send)
            return
        await refuse(error, scope, receive, send)


def _foreign(scope: dict[str, Any]) -> ApiError | None:
    headers = [(k, v.decode("latin-1")) for k, v in scope["headers"]]
    hosts = [v for k, v in headers if k == b"host"]
    if len(hosts) != 1 or not _local_authority(hosts[0]):
        return ApiError(403, "without an API key this server answers only requests whose "
                        "Host is localhost or a loopback address", code="forbidden_host")
    origins = [v for k, v in headers if k == b"origin"]
    if origins and not all(_local_origin(origin) for origin in origins):
        return ApiError(403, "without an API key this server refuses requests from a web "
                        "page of another Origin", code="forbidden_origin")
    if scope.get("method") == "POST":
        kinds = [v for k, v in headers if k == b"content-type"]
        kind = kinds[0].split(";")[0].strip().lower() if len(kinds) == 1 else ""
        if kind != "application/json":
            return ApiError(415, "the request body must be sent as application/json",
                            code="unsupported_media_type")
    return None


def _local_authority(authority: str) -> bool:
    """``localhost`` or a loopback address literal, with an optional port."""
    host = authority.strip().lower()
    if host.startswith("["):  # [::1]:8200
        host, bracket, rest = host[1:].partition("]")
        if not bracket or (rest and not (rest[0] == ":" and rest[1:].isdigit())):
            return False
    else:
        host, colon, port = host.partition(":")
        if colon and not port.isdigit():
            return False
    return loopback_host(host)


def _local_origin(origin: str) -> bool:
    scheme, sep, authority = origin.strip().partition("://")
    return bool(sep) and scheme.lower() in ("http", "https") and "/" not in authority \
        and _local_authority(authority)
