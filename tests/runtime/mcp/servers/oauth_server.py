"""The scripted server behind OAuth 2.1 on loopback: resource server and authorization server.

    python oauth_server.py PORT

``/mcp`` needs ``Authorization: Bearer <token>``; without it the answer is 401
with ``WWW-Authenticate: Bearer resource_metadata=...`` (RFC 9728). Calling the
``add`` tool needs the scope ``write`` besides ``tools``: a token without it gets
403 with ``error="insufficient_scope", scope="tools write"`` (the MCP
authorization spec's step-up). The authorization server offers metadata
(RFC 8414), dynamic client registration (RFC 7591), ``/authorize`` (which signs
the user in at once, for the scope asked, and redirects back with a code) and
``/token`` (authorization code with PKCE S256, and refresh). ``MOL_TEST_LOG``
records each grant and its scope.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import sys
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).parent))

import scripted_server
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route

PORT = int(sys.argv[1])
BASE = f"http://127.0.0.1:{PORT}"
CODES: dict[str, dict] = {}
TOKENS: dict[str, set[str]] = {}
"""Access token -> its scopes."""
REFRESH: dict[str, set[str]] = {}
STEP_UP = {"add": "write"}
"""Tool -> the scope (besides ``tools``) a call of it needs."""


async def resource_metadata(request: Request) -> Response:
    return JSONResponse({"resource": f"{BASE}/mcp", "authorization_servers": [BASE],
                         "scopes_supported": ["tools"]})


async def server_metadata(request: Request) -> Response:
    return JSONResponse({
        "issuer": BASE, "authorization_endpoint": f"{BASE}/authorize",
        "token_endpoint": f"{BASE}/token", "registration_endpoint": f"{BASE}/register",
        "response_types_supported": ["code"], "grant_types_supported": ["authorization_code",
                                                                        "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none", "client_secret_post"]})


async def register(request: Request) -> Response:
    body = await request.json()
    return JSONResponse({**body, "client_id": "client-" + secrets.token_hex(4),
                         "token_endpoint_auth_method": "none"}, status_code=201)


async def authorize(request: Request) -> Response:
    q = request.query_params
    code = secrets.token_hex(8)
    scope = q.get("scope") or "tools"
    CODES[code] = {"challenge": q["code_challenge"], "redirect": q["redirect_uri"],
                   "scope": set(scope.split())}
    scripted_server.record(f"oauth authorize scope={scope}")
    return RedirectResponse(f"{q['redirect_uri']}?{urlencode({'code': code, 'state': q['state'], 'iss': BASE})}",
                            status_code=302)


async def token(request: Request) -> Response:
    form = await request.form()
    if form["grant_type"] == "refresh_token":
        if form["refresh_token"] not in REFRESH:
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        scopes = REFRESH[form["refresh_token"]]
    else:
        grant = CODES.pop(form["code"], None)
        verifier = form.get("code_verifier", "")
        digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=")
        if grant is None or digest.decode() != grant["challenge"]:
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        scopes = grant["scope"]
    access, refresh = secrets.token_hex(12), secrets.token_hex(12)
    TOKENS[access] = REFRESH[refresh] = scopes
    scripted_server.record(f"oauth token {form['grant_type']}")
    return JSONResponse({"access_token": access, "token_type": "Bearer", "expires_in": 3600,
                         "refresh_token": refresh, "scope": " ".join(sorted(scopes))})


def protected(app):
    async def guard(scope, receive, send):
        if scope["type"] == "http":
            auth = dict(scope["headers"]).get(b"authorization", b"").decode()
            token = auth.removeprefix("Bearer ")
            if token not in TOKENS:
                scripted_server.record(f"http {scope['method']} unauthorized")
                challenge = f'Bearer resource_metadata="{BASE}/.well-known/oauth-protected-resource/mcp"'
                response = Response(json.dumps({"error": "invalid_token"}), status_code=401,
                                    headers={"WWW-Authenticate": challenge})
                await response(scope, receive, send)
                return
            body, receive = await _buffered(receive)
            needed = STEP_UP.get(_called_tool(body))
            if needed and needed not in TOKENS[token]:
                scripted_server.record(f"http {scope['method']} insufficient scope")
                challenge = (f'Bearer error="insufficient_scope", scope="tools {needed}", '
                             f'resource_metadata="{BASE}/.well-known/oauth-protected-resource/mcp"')
                response = Response(json.dumps({"error": "insufficient_scope"}), status_code=403,
                                    headers={"WWW-Authenticate": challenge})
                await response(scope, receive, send)
                return
            scripted_server.record(f"http {scope['method']} authorized")
        await app(scope, receive, send)
    return guard


async def _buffered(receive):
    """The request's body, and a ``receive`` that hands it over again."""
    chunks, more = [], True
    while more:
        message = await receive()
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    body = b"".join(chunks)
    sent = False

    async def again():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, again


def _called_tool(body: bytes) -> str | None:
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if isinstance(message, dict) and message.get("method") == "tools/call":
        return (message.get("params") or {}).get("name")
    return None


def main() -> None:
    import uvicorn

    mcp_app = scripted_server.server.streamable_http_app()
    routes = [
        Route("/.well-known/oauth-protected-resource/mcp", resource_metadata),
        Route("/.well-known/oauth-protected-resource", resource_metadata),
        Route("/.well-known/oauth-authorization-server", server_metadata),
        Route("/register", register, methods=["POST"]),
        Route("/authorize", authorize),
        Route("/token", token, methods=["POST"]),
        Mount("/", app=protected(mcp_app)),
    ]
    app = Starlette(routes=routes, lifespan=lambda app: mcp_app.router.lifespan_context(app))
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning")


if __name__ == "__main__":
    main()
