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
start, ``mol run``), or the person declines, ``signin.Contained`` ends the request that
needed it with the reason (naming ``mol mcp login NAME``), and the connection lives on.
``urls.url_guard`` checks every request the connection makes, the OAuth ones included.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Awaitable, Callable
from hashlib import sha256
from pathlib import Path
from typing import Any

from mol.core.errors import MCPError, MCPStartupError

logger = logging.getLogger("mol.mcp")



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
    from mol.runtime.mcp.sdk.signin import Contained, SignIn

    flow = SignIn(name, config, sign_in)
    provider = OAuthClientProvider(
        config.url, metadata, storage, redirect_handler=flow.redirect,
        callback_handler=flow.callback, client_metadata_url=oauth.client_metadata_url)
    return Contained(name, provider, can_sign_in, refused)


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
