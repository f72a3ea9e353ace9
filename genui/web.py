"""Serving the preview over HTTP: the page, and the local modules it loads.

``mol genui preview`` runs ``preview_app``; ``mol serve`` mounts ``asset_route`` and answers
``GET /ui/{response_id}`` with ``page_response``. Module files are sent with
``Access-Control-Allow-Origin: *``: a sandboxed frame has an opaque origin, so to the
browser the page's own server is another origin, and module scripts load in CORS mode.
"""

from __future__ import annotations

from typing import Any

from mol.genui import toolchain
from mol.genui.preview import ASSETS, asset, csp, page
from mol.genui.report import Checked


def origin_of(request: Any) -> str:
    """``http://host:port`` of the request, as the browser sees the page."""
    return str(request.base_url).rstrip("/")


def page_response(uis: list[Checked], request: Any, title: str = "GenUI preview") -> Any:
    """The preview page, with its policy also sent as a header."""
    from starlette.responses import HTMLResponse

    origin = origin_of(request)
    return HTMLResponse(page(uis, origin, title), headers={
        "Content-Security-Policy": csp(origin), "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"})


CORS = {"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": "GET",
        "Access-Control-Allow-Headers": "authorization", "Access-Control-Max-Age": "3600"}
"""Answers to a frame's preflight: a client that sends its key with every request (a
browser told to add the header, say) still gets the modules."""


async def serve_asset(request: Any) -> Any:
    """``GET /ui/assets/{name}``: a module of the GenUI cache, or 404 (``OPTIONS``: the
    CORS preflight)."""
    from starlette.responses import FileResponse, PlainTextResponse, Response

    if request.method == "OPTIONS":
        return Response(status_code=204, headers=CORS)
    name = request.path_params["name"]
    found = asset(toolchain.find().assets, name)
    if found is None:
        return PlainTextResponse(f"no asset {name!r}", status_code=404)
    return FileResponse(found, media_type="text/javascript", headers={
        "Access-Control-Allow-Origin": "*", "X-Content-Type-Options": "nosniff",
        "Cache-Control": "max-age=3600"})


def asset_route() -> Any:
    """The route serving the preview's modules."""
    from starlette.routing import Route

    return Route(ASSETS + "/{name:path}", serve_asset, methods=["GET", "OPTIONS"])


def preview_app(uis: list[Checked], title: str) -> Any:
    """A small app for ``mol genui preview``: the page at ``/`` and the modules."""
    from starlette.applications import Starlette
    from starlette.routing import Route

    async def index(request: Any) -> Any:
        return page_response(uis, request, title)

    return Starlette(routes=[Route("/", index, methods=["GET"]), asset_route()])
