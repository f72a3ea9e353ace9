"""``GET /health``: whether the engine and the required MCP servers answer (no auth)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from mol.runtime import http_client


async def health(request: Request) -> Response:
    """Whether the engine and the required MCP servers answer (no auth; names and states
    only, never error details)."""
    import httpx

    runner = getattr(request.app.state, "runner", None)
    runtime = getattr(runner, "runtime", None)
    url = getattr(getattr(runtime, "engine", None), "api_base", None)
    ok, detail = True, "not an HTTP engine"
    if url:
        try:
            async with http_client(url, 2.0) as client:
                answer = await client.get(url.rstrip("/") + "/models")
            ok, detail = answer.status_code < 500, f"HTTP {answer.status_code}"
        except httpx.HTTPError as exc:
            ok, detail = False, type(exc).__name__
    servers = [{"name": s.name, "state": s.state, "required": s.required}
               for toolset in getattr(runtime, "toolsets", [])
               for s in (toolset.status() if hasattr(toolset, "status") else [])]
    healthy = ok and all(s["state"] == "ready" for s in servers if s["required"])
    body = {"status": "ok" if healthy else "degraded", "engine": {"ok": ok, "detail": detail},
            "mcp_servers": servers}
    return JSONResponse(body, status_code=200 if healthy else 503)
