"""The ``[mcp_servers.NAME]`` sections of an HCP artifact (Codex field names, plus
sampling, elicitation, roots, logging and OAuth)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from mol.hcp.base import EnvVarName, Model, PositiveFloat


class MCPSamplingConfig(Model):
    """How mol answers a server's ``sampling/createMessage``: through the engine, as one
    adapter, counted in the turn's usage and token budget."""

    adapter: str = "L0"
    """Adapter that writes the reply (one of the artifact's adapters)."""
    max_tokens: int = Field(default=1024, ge=1, le=65536)
    """Most tokens one reply may take (the server's ``maxTokens`` is capped to this)."""
    allow: bool = True
    """Set to false to refuse every request, with a message saying so."""


class MCPOAuthConfig(Model):
    """OAuth 2.1 for a streamable HTTP server (the MCP authorization spec): discovery of the
    authorization server, dynamic client registration or a pre-registered client, PKCE,
    refresh, scope step-up. Tokens are kept under the state folder with mode 0600."""

    grant: Literal["authorization_code", "client_credentials", "identity_assertion"] = (
        "authorization_code")
    """``authorization_code``: a person signs in once with ``mol mcp login NAME``;
    ``client_credentials``: mol gets tokens itself (machine-to-machine);
    ``identity_assertion``: enterprise-managed authorization (SEP-990), the user's ID token
    exchanged at the enterprise identity provider for an ID-JAG, then for a token."""
    client_id: str | None = None
    """A pre-registered client; unset: dynamic client registration."""
    client_secret_env_var: EnvVarName | None = None
    """Environment variable holding the pre-registered client's secret."""
    private_key_env_var: EnvVarName | None = None
    """With ``client_credentials``: environment variable holding a PEM private key; the
    client then authenticates with a signed JWT (RFC 7523 ``private_key_jwt``) instead of
    a secret."""
    signing_algorithm: str = "ES256"
    """JWS algorithm of that JWT (``ES256``, ``RS256``, ...)."""
    issuer: str | None = None
    """With ``identity_assertion``: the MCP authorization server's issuer (configured, never
    taken from the resource server)."""
    idp_token_endpoint: str | None = None
    """With ``identity_assertion``: the identity provider's token endpoint (RFC 8693)."""
    idp_client_id: str | None = None
    """With ``identity_assertion``: mol's client id at the identity provider."""
    id_token_env_var: EnvVarName | None = None
    """With ``identity_assertion``: environment variable holding the user's ID token."""
    client_metadata_url: str | None = None
    """An HTTPS URL naming a client metadata document (used as the client id where the
    authorization server supports it)."""
    scopes: list[str] = Field(default_factory=list)
    """Scopes to ask for; unset: what the server advertises."""
    redirect_port: int = Field(default=33418, ge=1024, le=65535)
    """Loopback port of ``mol mcp login``'s redirect (``http://127.0.0.1:PORT/callback``)."""


class MCPServerConfig(Model):
    """An MCP server (Codex field names). Give ``command`` for stdio or ``url`` for
    streamable HTTP, not both."""

    command: str | None = None
    """Program to start for a stdio server."""
    args: list[str] = Field(default_factory=list)
    """Arguments of ``command``."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables for the server (plain values; pass secrets with ``env_vars``)."""
    env_vars: list[EnvVarName] = Field(default_factory=list)
    """Names of environment variables passed through from mol's environment."""
    env_from: dict[EnvVarName, EnvVarName] = Field(default_factory=dict)
    """Server variables set from mol's environment variables of another name
    (``{ GITHUB_TOKEN = "MY_GITHUB_TOKEN" }``); an unset source variable is left out."""
    cwd: str | None = None
    """Working directory of the server process."""
    url: str | None = None
    """Endpoint of a streamable HTTP server."""
    bearer_token_env_var: EnvVarName | None = None
    """Environment variable holding the bearer token sent to an HTTP server."""
    http_headers: dict[str, str] = Field(default_factory=dict)
    """Extra HTTP headers with plain values (no credentials)."""
    env_http_headers: dict[str, EnvVarName] = Field(default_factory=dict)
    """HTTP headers whose values come from the named environment variables."""
    startup_timeout_sec: PositiveFloat = 10.0
    """Deadline for starting the server and completing ``initialize``."""
    tool_timeout_sec: PositiveFloat = 60.0
    """Deadline of one tool call."""
    enabled_tools: list[str] | None = None
    """If set, only these tools of the server are exposed."""
    disabled_tools: list[str] = Field(default_factory=list)
    """Tools of the server never exposed (applied after ``enabled_tools``)."""
    required: bool = False
    """If the server fails to start, abort the session instead of skipping it."""
    enabled: bool = True
    """Set to false to skip the server entirely."""
    sampling: MCPSamplingConfig | None = None
    """Answer the server's sampling requests through the engine; unset: mol does not offer
    sampling to this server."""
    elicitation: Literal["ask", "decline"] = "ask"
    """``ask``: the person answers (``mol chat`` asks at the terminal; ``mol serve`` hands
    the request to an API client that declares the ``mcp_elicitation`` tool; without a
    person, e.g. ``mol run``, the request is declined); ``decline``: always decline."""
    approval_timeout_sec: float | None = Field(default=None, gt=0, le=7 * 24 * 3600)
    """Seconds a call of this server's ``ask`` tools waits for an API client's approval
    through ``mol serve``, then is denied; unset: ``[server] approval_timeout_sec``."""
    roots: list[str] = Field(default_factory=list)
    """Folders offered to the server as roots (relative to the artifact), besides the
    sandbox workspace once the session has a sandbox."""
    log_level: Literal["debug", "info", "notice", "warning", "error", "critical", "alert",
                       "emergency"] = "warning"
    """Lowest level of the server's log messages mol asks for (into the ``mol.mcp`` log)."""
    oauth: MCPOAuthConfig | None = None
    """OAuth for a streamable HTTP server (``mol mcp login NAME`` signs in)."""

    @model_validator(mode="after")
    def _one_transport(self) -> MCPServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of 'command' (stdio) or 'url' (streamable HTTP)")
        for header in self.http_headers:
            if header.lower() in ("authorization", "proxy-authorization"):
                raise ValueError(
                    f"http_headers.{header} would put a credential inline; "
                    "use bearer_token_env_var or env_http_headers"
                )
        if self.oauth is not None and (self.url is None or self.bearer_token_env_var):
            raise ValueError("oauth needs 'url' (streamable HTTP) and no bearer_token_env_var")
        return self
