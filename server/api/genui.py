"""Generated UI in the server's replies, and ``GET /ui/{response_id}``.

A turn whose adapter checks its UI (``[adapters.X.genui]``) emits ``GenUIChecked``
events; the reply keeps the last one (``Reply.genui``) and these helpers render
it: Chat Completions keep the answer's text and add ``metadata.genui``;
Responses add an output item of type ``mol.genui`` after the message. Both carry
the same part: ``valid``, ``attempts`` and ``uis`` (each UI's kind, verdict,
problems, and its A2UI ``messages`` or TSX ``code``).

``GET /ui/{response_id}`` (behind the API key like every route) serves the
preview page of a stored response's ``mol.genui`` item; the modules it loads
come from ``/ui/assets/`` (open, see ``mol.genui.web``).
"""

from __future__ import annotations

import secrets
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from mol.core import events as ev
from mol.server.http.errors import ApiError

ITEM_TYPE = "mol.genui"


def genui_part(checked: ev.GenUIChecked | None) -> dict[str, Any] | None:
    """What clients are told of the turn's last UI check, or None when nothing was checked."""
    if checked is None:
        return None
    return {"valid": checked.valid, "attempts": checked.attempt + 1, "uis": checked.uis}


def chat_metadata(checked: ev.GenUIChecked | None) -> dict[str, Any]:
    """The ``metadata`` entries of a chat completion (or its last chunk): ``genui``."""
    part = genui_part(checked)
    return {} if part is None else {"genui": part}


def response_item(checked: ev.GenUIChecked | None) -> dict[str, Any] | None:
    """The Responses output item of type ``mol.genui``, or None."""
    part = genui_part(checked)
    if part is None:
        return None
    return {"type": ITEM_TYPE, "id": "genui_" + secrets.token_hex(12), "status": "completed",
            **part}


async def ui_page(request: Request) -> Response:
    """``GET /ui/{response_id}``: the preview of a stored response's generated UI."""
    from mol.core.errors import GenUIError
    from mol.genui.checker import check_blocks
    from mol.genui.extract import Block
    from mol.genui.web import page_response

    response_id = request.path_params["response_id"]
    found = await request.app.state.runner.store.get_response(response_id)
    if found is None:
        raise ApiError(404, f"no stored response {response_id!r}", param="response_id")
    items = [i for i in found.get("output") or [] if i.get("type") == ITEM_TYPE]
    if not items:
        raise ApiError(404, f"response {response_id!r} holds no generated UI",
                       param="response_id")
    blocks = [Block("tsx", ui["code"]) if ui.get("kind") == "tsx"
              else Block("a2ui", "\n".join(_json_lines(ui.get("messages") or [])))
              for ui in items[-1].get("uis") or []]
    try:
        uis = await check_blocks(blocks, origin="response")  # compiles TSX for the frame
    except GenUIError as exc:
        raise ApiError(503, f"the preview cannot be built: {exc}") from None
    return page_response(uis, request, f"GenUI preview: {response_id}")


def _json_lines(messages: list[Any]) -> list[str]:
    import json

    return [json.dumps(message, ensure_ascii=False) for message in messages]
