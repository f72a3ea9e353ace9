"""Stored responses: ``GET /v1/responses/{id}``, its ``input_items``, ``DELETE`` and ``cancel``.

A response made with ``store`` (the default) is kept with the input items of its request.
``DELETE`` forgets it: it can no longer be read nor continued by ``previous_response_id``
(its conversation stays, and a client replaying its transcript still continues it).
``cancel`` stops a response still in progress (a stream another connection reads): the
harness marks its turn interrupted at a consistent point, and the stream ends with
``response.failed`` (status ``cancelled``) and the response is not kept; a completed
response cannot be cancelled.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from mol.server.api.responses import INPUT_KEY
from mol.server.http.errors import ApiError

ORDERS = ("asc", "desc")


async def _stored(request: Request) -> tuple[str, dict[str, Any]]:
    response_id = request.path_params["response_id"]
    found = await request.app.state.runner.store.get_response(response_id)
    if found is None:
        raise ApiError(404, f"no stored response {response_id!r}", param="response_id")
    return response_id, found


async def get_response(request: Request) -> Response:
    """``GET /v1/responses/{id}``: a stored response, or 404."""
    _, found = await _stored(request)
    return JSONResponse({k: v for k, v in found.items() if k != INPUT_KEY})


async def input_items(request: Request) -> Response:
    """``GET /v1/responses/{id}/input_items``: the items of its request's ``input``, a page
    at a time (``limit`` 1-100, default 20; ``order`` ``desc`` by default; ``after`` an
    item id)."""
    _, found = await _stored(request)
    query = request.query_params
    order = query.get("order", "desc")
    if order not in ORDERS:
        raise ApiError(400, f"'order' must be asc or desc, got {order!r}", param="order")
    limit_text = query.get("limit", "20")
    if not limit_text.isdigit() or not 1 <= int(limit_text) <= 100:
        raise ApiError(400, f"'limit' must be a whole number from 1 to 100, got "
                       f"{limit_text!r}", param="limit")
    items = list(found.get(INPUT_KEY) or [])
    if order == "desc":
        items.reverse()
    after = query.get("after")
    if after is not None:
        ids = [item.get("id") for item in items]
        if after not in ids:
            raise ApiError(400, f"'after' {after!r} is not an item of this response",
                           param="after")
        items = items[ids.index(after) + 1:]
    page = items[:int(limit_text)]
    return JSONResponse({"object": "list", "data": page,
                         "first_id": page[0]["id"] if page else None,
                         "last_id": page[-1]["id"] if page else None,
                         "has_more": len(items) > len(page)})


async def delete_response(request: Request) -> Response:
    """``DELETE /v1/responses/{id}``: forget a stored response; 404 if unknown."""
    response_id = request.path_params["response_id"]
    runner = request.app.state.runner
    runner.forget(response_id)  # its turn may still be summarising: it must not write it back
    if not await runner.store.delete_response(response_id):
        raise ApiError(404, f"no stored response {response_id!r}", param="response_id")
    return JSONResponse({"id": response_id, "object": "response.deleted", "deleted": True})


async def cancel_response(request: Request) -> Response:
    """``POST /v1/responses/{id}/cancel``: stop a response in progress; the response object
    (status ``cancelled``). 400 for a completed response, 404 for an unknown one."""
    response_id = request.path_params["response_id"]
    job = request.app.state.runner.cancel(response_id)
    if job is not None:
        body = job.render("cancelled") if job.render is not None else {
            "id": response_id, "object": "response", "status": "cancelled"}
        return JSONResponse(body)
    await _stored(request)
    raise ApiError(400, f"response {response_id!r} is already completed; only a response in "
                   "progress can be cancelled", param="response_id")
