"""``GET /health``: whether the engine answers and serves every adapter, and whether the
required MCP servers are ready (no auth)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from mol.core.errors import EngineConnectionError, EngineError, EngineResponseError
from mol.runtime import check_engine


async def health(request: Request) -> Response:
    """``ok`` (200); ``not_ready`` (503) while the engine answers but misses an adapter
    or serves one on a foreign base; ``degraded`` (503) when the engine does not answer
    or a required MCP server is not ready. Names and states only, never error details."""
    runner = getattr(request.app.state, "runner", None)
    runtime = getattr(runner, "runtime", None)
    engine = await _engine(runtime)
    servers = [{"name": s.name, "state": s.state, "required": s.required}
               for toolset in getattr(runtime, "toolsets", [])
               for s in (toolset.status() if hasattr(toolset, "status") else [])]
    servers_ready = all(s["state"] == "ready" for s in servers if s["required"])
    if engine.get("missing") or engine.get("foreign"):
        status = "not_ready"
    else:
        status = "ok" if engine["ok"] and servers_ready else "degraded"
    body = {"status": status, "engine": engine, "mcp_servers": servers}
    return JSONResponse(body, status_code=200 if status == "ok" else 503)


async def _engine(runtime: Any) -> dict[str, Any]:
    """The engine's part of the answer: ``ok`` and a ``detail`` (``HTTP <status>``, the
    failure's kind, or ``not_ready: <adapters>`` with their names under ``missing`` and
    ``foreign``), re-checked at every call."""
    if runtime is None:
        return {"ok": True, "detail": "not an HTTP engine"}
    try:
        check = await check_engine(runtime.artifact, runtime.engine, wait=2.0)
    except EngineConnectionError as exc:
        return {"ok": False, "detail": type(exc.__cause__ or exc).__name__}
    except EngineResponseError as exc:
        status = exc.status or 500
        return {"ok": status < 500, "detail": f"HTTP {status}"}
    except EngineError:  # an answer that is no model list: the engine answers, unchecked
        return {"ok": True, "detail": "HTTP 200"}
    if check is None:
        return {"ok": True, "detail": "not an HTTP engine"}
    if not check.problems:
        return {"ok": True, "detail": "HTTP 200"}
    found: dict[str, Any] = {"ok": False, "detail": "not_ready: " + ", ".join(
        state.adapter for state in check.problems)}
    for kind in ("missing", "foreign"):
        if check.named(kind):
            found[kind] = check.named(kind)
    return found
