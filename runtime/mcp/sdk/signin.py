"""A person's sign-in to an MCP server's OAuth, and what happens when none can be had.

``SignIn`` is the SDK provider's redirect and callback handlers: the authorization URL goes
to ``open_url`` (``mol mcp login``'s browser, or the person of a tool call through
``Answers.sign_in``), and the browser comes back to a loopback listener
(``http://127.0.0.1:PORT/callback``). ``Contained`` wraps the provider so that a sign-in
nobody can give, or the person declines, fails only the request that needed it: the SDK's
flow would raise, and an exception there ends the whole connection. This module is imported
only when a connection with ``oauth`` opens (``oauth.auth_for``), after the SDK.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
from mcp.client.auth.utils import extract_field_from_www_auth

from mol.core.errors import MCPSignInError, exception_leaves
from mol.runtime.mcp.sdk.urls import check_url, is_local

LOGIN_TIMEOUT_SEC = 300.0
"""How long a sign-in waits for the browser to come back."""


class SignIn:
    """One authorization-code sign-in at a time: the URL goes to ``open_url``, the browser
    comes back to a loopback listener (``http://127.0.0.1:PORT/callback``)."""

    def __init__(self, name: str, config: Any, open_url: Callable[[str], Awaitable[None]] | None
                 ) -> None:
        self.name = name
        self.config = config
        self.open_url = open_url
        self.url = ""
        self.listener: Any = None
        self.query: dict[str, str] = {}
        self.arrived = anyio.Event()

    async def redirect(self, url: str) -> None:
        """Check the authorization URL and listen for the redirect (the SDK's redirect handler)."""
        if self.open_url is None:
            raise MCPSignInError(f"MCP server {self.name!r} needs a sign-in: run "
                                 f"'mol mcp login {self.name}'")
        if not await is_local(self.config.url):
            await check_url(url)
        self.url, self.query, self.arrived = url, {}, anyio.Event()
        self.listener = await anyio.create_tcp_listener(
            local_host="127.0.0.1", local_port=self.config.oauth.redirect_port)

    async def callback(self) -> Any:
        """Open the URL, wait for the browser to come back; the code (the callback handler)."""
        from mcp.shared.auth import AuthorizationCodeResult

        assert self.open_url is not None and self.listener is not None
        async with self.listener:
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self.listener.serve, self._handle)
                    await self.open_url(self.url)
                    with anyio.move_on_after(LOGIN_TIMEOUT_SEC):
                        await self.arrived.wait()
                    tg.cancel_scope.cancel()
            except BaseExceptionGroup as group:  # the URL's opener failed: say it as it said
                raise exception_leaves(group)[0] from None
        if not self.arrived.is_set():
            raise MCPSignInError(f"the sign-in to MCP server {self.name!r} did not come back "
                                 f"within {LOGIN_TIMEOUT_SEC:g} s")
        if "code" not in self.query:
            reason = self.query.get("error_description") or self.query.get("error") or "no code came back"
            raise MCPSignInError(f"the sign-in to MCP server {self.name!r} failed: {reason}")
        return AuthorizationCodeResult(code=self.query["code"], state=self.query.get("state"),
                                       iss=self.query.get("iss"))

    async def _handle(self, stream: Any) -> None:
        async with stream:
            data = b""
            with anyio.move_on_after(10):
                while b"\r\n\r\n" not in data and len(data) < 65536:
                    data += await stream.receive()
            words = data.split(b" ", 2)
            parts = urlsplit(words[1].decode(errors="replace") if len(words) > 2 else "")
            if parts.path != "/callback":
                await stream.send(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                return
            self.query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            body = b"mol: signed in. You can close this window.\n"
            await stream.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: "
                              + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
            self.arrived.set()


class Contained(httpx2.Auth):
    """The SDK's authorization-code provider, with a sign-in it cannot have ending only the
    request that needed it: when nobody can sign in, the ``401`` (or the ``403
    insufficient_scope``) goes back to the transport as it came, which fails that request;
    a sign-in that fails midway (``MCPSignInError``: declined, nobody there) ends the flow
    the same way. ``refused`` is told why, for the request's error."""

    requires_response_body = True

    def __init__(self, name: str, provider: Any, can_sign_in: Callable[[], bool],
                 refused: Callable[[str], None]) -> None:
        self.name, self.provider = name, provider
        self.can_sign_in, self.refused = can_sign_in, refused
        _quiet_sign_in_failures()

    async def async_auth_flow(self, request: Any) -> Any:
        flow = self.provider.async_auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            first = None  # the server's answer to the request itself
            while True:
                response = yield outgoing
                if first is None and outgoing is request:
                    first = response
                    if not self._may_sign_in(response):
                        return
                try:
                    outgoing = await flow.asend(response)
                except MCPSignInError as exc:
                    self.refused(str(exc))
                    if response is not first:
                        # httpx hands back the last response, here the flow's own
                        # (metadata); the server refused the request unprocessed, so it is
                        # sent once more, unchanged, for that refusal to be the answer.
                        yield request
                    return
        except StopAsyncIteration:
            return
        finally:
            await flow.aclose()

    def _may_sign_in(self, response: Any) -> bool:
        """False (and ``refused`` told why) when ``response`` asks for a sign-in nobody can
        give now."""
        step_up = (response.status_code == 403 and
                   extract_field_from_www_auth(response, "error") == "insufficient_scope")
        if (response.status_code != 401 and not step_up) or self.can_sign_in():
            return True
        if step_up:
            scope = extract_field_from_www_auth(response, "scope") or ""
            self.refused(f"the server asks for more access (scope {scope!r}) than mol was "
                         "granted, and nobody is here to sign in again: add it to "
                         f"[mcp_servers.{self.name}] oauth.scopes and run "
                         f"'mol mcp login {self.name}'")
        else:
            self.refused(f"MCP server {self.name!r} needs a sign-in: run "
                         f"'mol mcp login {self.name}'")
        return False


def _quiet_sign_in_failures() -> None:
    """The SDK logs every exception of its flow with a traceback; a sign-in the person
    declined is said once, as the request's error, not as a crash."""
    target = logging.getLogger("mcp.client.auth.oauth2")
    if not any(isinstance(f, _SignInFilter) for f in target.filters):
        target.addFilter(_SignInFilter())


class _SignInFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], MCPSignInError))
