"""OAuth 2.1 for streamable HTTP servers, on the SDK's OAuth client provider.

``auth_for`` gives a connection its ``httpx2.Auth``: the SDK's provider does
discovery (protected resource metadata, then authorization server metadata),
dynamic client registration or a pre-registered client, PKCE, refresh and
scope step-up (a ``403`` with ``error="insufficient_scope"``: it signs in again for
the union of the scopes it holds and the ones challenged, then retries the request
once); ``client_credentials`` gets tokens with no person involved.
Tokens and the registered client live in ``<state>/mcp-oauth/`` (``$MOL_STATE_DIR``,
else ``$XDG_STATE_HOME/mol``, else ``~/.local/state/mol``), each file mode
0600. A sign-in (``SignIn``) shows a person the authorization URL and waits on a
loopback redirect: ``mol mcp login NAME`` runs it once, and during a tool call the
call's person is asked (``Answers.sign_in``: ``mol chat`` at the terminal, a ``mol
serve`` client through ``mcp_elicitation``). Where nobody can sign in (a server's
start, ``mol run``), or the person declines, ``contained`` ends the request that
needed it with the reason (naming ``mol mcp login NAME``), and the connection lives on.

``url_guard`` checks every request the connection makes, the OAuth ones
included: a URL whose host is private, link-local, loopback or otherwise not
public is refused unless the MCP server itself is on such an address.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from functools import cache
from hashlib import sha256
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio

from mol.core.errors import MCPError, MCPSignInError, MCPStartupError, exception_leaves

logger = logging.getLogger("mol.mcp")

LOGIN_TIMEOUT_SEC = 300.0
"""How long ``mol mcp login`` waits for the browser to come back."""


def state_dir() -> Path:
    """mol's state folder (tokens, the session store's default place)."""
    if os.environ.get("MOL_STATE_DIR"):
        return Path(os.environ["MOL_STATE_DIR"])
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "mol"


def token_path(name: str, url: str) -> Path:
    """Where the tokens of server ``name`` at ``url`` are kept."""
    return state_dir() / "mcp-oauth" / f"{name}-{sha256(url.encode()).hexdigest()[:12]}.json"


class FileTokenStorage:
    """The SDK's ``TokenStorage`` on one JSON file, written with mode 0600."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _read(self) -> dict[str, Any]:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}

    def _write(self, key: str, value: Any) -> None:
        data = self._read()
        data[key] = value.model_dump(mode="json", exclude_none=True)
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        temp = self.path.with_suffix(".tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
        os.chmod(temp, 0o600)
        os.replace(temp, self.path)

    async def get_tokens(self) -> Any:
        """The stored tokens, or None."""
        from mcp.shared.auth import OAuthToken

        raw = self._read().get("tokens")
        return OAuthToken.model_validate(raw) if raw else None

    async def set_tokens(self, tokens: Any) -> None:
        """Store ``tokens``."""
        self._write("tokens", tokens)

    async def get_client_info(self) -> Any:
        """The registered client, or None."""
        from mcp.shared.auth import OAuthClientInformationFull

        raw = self._read().get("client")
        return OAuthClientInformationFull.model_validate(raw) if raw else None

    async def set_client_info(self, client_info: Any) -> None:
        """Store the registered client."""
        self._write("client", client_info)


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


def redirect_uri(config: Any) -> str:
    """The loopback redirect of ``mol mcp login``."""
    return f"http://127.0.0.1:{config.oauth.redirect_port}/callback"


def auth_for(name: str, config: Any, sign_in: Callable[[str], Awaitable[None]] | None = None,
             can_sign_in: Callable[[], bool] = lambda: False,
             refused: Callable[[str], None] = lambda reason: None) -> Any:
    """The ``httpx2.Auth`` of server ``name``. ``sign_in`` opens an authorization URL for a
    person (raising ``MCPSignInError`` when it cannot); ``can_sign_in`` says whether anyone
    can, for the request being sent; ``refused`` is told why a request went without the
    sign-in it needed."""
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata

    oauth = config.oauth
    storage = FileTokenStorage(token_path(name, config.url))
    secret = os.environ.get(oauth.client_secret_env_var) if oauth.client_secret_env_var else None
    if oauth.client_secret_env_var and not secret:
        raise MCPStartupError(f"client_secret_env_var {oauth.client_secret_env_var} is not set")
    scope = " ".join(oauth.scopes) or None
    if oauth.grant == "client_credentials":
        return _machine_auth(config, storage, secret, scope)
    if oauth.grant == "identity_assertion":
        return _enterprise_auth(config, storage, secret, scope)
    if oauth.client_id and not os.path.exists(storage.path):
        client = OAuthClientInformationFull(
            client_id=oauth.client_id, client_secret=secret, redirect_uris=[redirect_uri(config)],
            token_endpoint_auth_method="client_secret_basic" if secret else "none")
        storage._write("client", client)
    metadata = OAuthClientMetadata(
        client_name="mol", redirect_uris=[redirect_uri(config)], scope=scope,
        grant_types=["authorization_code", "refresh_token"], response_types=["code"])
    flow = SignIn(name, config, sign_in)
    provider = OAuthClientProvider(
        config.url, metadata, storage, redirect_handler=flow.redirect,
        callback_handler=flow.callback, client_metadata_url=oauth.client_metadata_url)
    return contained(name, provider, can_sign_in, refused)


@cache
def _contained_class() -> Any:
    import httpx2
    from mcp.client.auth.utils import extract_field_from_www_auth

    class _Contained(httpx2.Auth):
        """The SDK's authorization-code provider, with a sign-in it cannot have ending only
        the request that needed it: when nobody can sign in, the ``401`` (or the ``403
        insufficient_scope``) goes back to the transport as it came, which fails that request;
        a sign-in that fails midway (``MCPSignInError``: declined, nobody there) ends the flow
        the same way. The SDK would raise instead, which ends the whole connection."""

        requires_response_body = True

        def __init__(self, name: str, provider: Any, can_sign_in: Callable[[], bool],
                     refused: Callable[[str], None]) -> None:
            self.name, self.provider = name, provider
            self.can_sign_in, self.refused = can_sign_in, refused

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
                            # (metadata); the server refused the request unprocessed, so it
                            # is sent once more, unchanged, for that refusal to be the answer.
                            yield request
                        return
            except StopAsyncIteration:
                return
            finally:
                await flow.aclose()

        def _may_sign_in(self, response: Any) -> bool:
            """False (and ``refused`` told why) when ``response`` asks for a sign-in nobody
            can give now."""
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

    return _Contained


def contained(name: str, provider: Any, can_sign_in: Callable[[], bool],
              refused: Callable[[str], None]) -> Any:
    """``provider`` (the SDK's authorization-code provider) whose sign-in, when it cannot be
    had, fails only the request that needed it (see ``_Contained``)."""
    _quiet_sign_in_failures()
    return _contained_class()(name, provider, can_sign_in, refused)


def _quiet_sign_in_failures() -> None:
    """The SDK logs every exception of its flow with a traceback; a sign-in the person
    declined is said once, as the request's error, not as a crash."""
    target = logging.getLogger("mcp.client.auth.oauth2")
    if not any(isinstance(f, _SignInFilter) for f in target.filters):
        target.addFilter(_SignInFilter())


class _SignInFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], MCPSignInError))


def _machine_auth(config: Any, storage: FileTokenStorage, secret: str | None,
                  scope: str | None) -> Any:
    """``client_credentials`` with a secret, or with a signed JWT (``private_key_jwt``)."""
    from mcp.client.auth.extensions.client_credentials import (
        ClientCredentialsOAuthProvider,
        PrivateKeyJWTOAuthProvider,
        SignedJWTParameters,
    )

    oauth = config.oauth
    key = os.environ.get(oauth.private_key_env_var) if oauth.private_key_env_var else None
    if oauth.private_key_env_var and not key:
        raise MCPStartupError(f"private_key_env_var {oauth.private_key_env_var} is not set")
    if not oauth.client_id or not (secret or key):
        raise MCPStartupError("oauth.grant = 'client_credentials' needs client_id and "
                              "client_secret_env_var or private_key_env_var")
    if key:
        jwt = SignedJWTParameters(issuer=oauth.client_id, subject=oauth.client_id,
                                  signing_key=key, signing_algorithm=oauth.signing_algorithm)
        return PrivateKeyJWTOAuthProvider(config.url, storage, oauth.client_id,
                                          jwt.create_assertion_provider(), scope=scope)
    return ClientCredentialsOAuthProvider(config.url, storage, oauth.client_id, secret, scope=scope)


def _enterprise_auth(config: Any, storage: FileTokenStorage, secret: str | None,
                     scope: str | None) -> Any:
    """SEP-990: the ID token exchanged at the identity provider (RFC 8693) for an ID-JAG,
    presented to the MCP authorization server as a jwt-bearer grant (RFC 7523)."""
    import httpx2
    from mcp.client.auth.extensions.identity_assertion import IdentityAssertionOAuthProvider

    oauth = config.oauth
    id_token = os.environ.get(oauth.id_token_env_var or "")
    if not (oauth.client_id and secret and oauth.issuer and oauth.idp_token_endpoint
            and oauth.idp_client_id and id_token):
        raise MCPStartupError("oauth.grant = 'identity_assertion' needs client_id, "
                              "client_secret_env_var, issuer, idp_token_endpoint, idp_client_id "
                              "and id_token_env_var (set)")

    async def id_jag(audience: str, resource: str) -> str:
        async with httpx2.AsyncClient(timeout=30) as http:
            answer = await http.post(oauth.idp_token_endpoint, data={
                "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
                "requested_token_type": "urn:ietf:params:oauth:token-type:id-jag",
                "subject_token": id_token,
                "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
                "audience": audience, "resource": resource, "client_id": oauth.idp_client_id})
        if answer.status_code != 200:
            raise MCPError(f"the identity provider refused the token exchange: HTTP "
                           f"{answer.status_code}")
        return answer.json()["access_token"]

    return IdentityAssertionOAuthProvider(
        config.url, storage, oauth.client_id, secret, oauth.issuer, id_jag, scope=scope,
        token_endpoint_auth_method="client_secret_basic")


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
