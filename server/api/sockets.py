"""``GET /v1/responses`` upgraded to a WebSocket: the Responses API over one connection, as
the official ``openai`` client's ``responses.connect()`` and Codex (``supports_websockets``)
speak it.

Each text message is a client event. ``response.create`` carries a Responses body at its
top level (``stream`` is implied); the response runs as ``POST /v1/responses`` runs it
(``mol.server.api.responses.start_response``: the same checks, limits, admission and
turn) and its events go out as messages, the same events as the SSE stream, echoing the
request's ``stream_id`` when it has one. Responses run one after another, in the order
their requests arrived; several may run on one connection, and ``previous_response_id``
chains them. A ``store: false`` response is kept in this connection's memory only (at most
the ``KEPT`` latest): a request on the connection naming it continues its conversation
where it ended, with its per-adapter views, as a stored response is continued (Codex sends
``store: false`` and, on a WebSocket, only the new input items with
``previous_response_id``); elsewhere it is unknown. ``generate: false`` (Codex warming a
connection up) runs no turn: the request is checked and its input kept, its response
completes at once without output, and a request naming it has that input put before its
own. ``response.processed`` (Codex acknowledging a response) needs no answer. A request that fails before its response
starts, or a client event mol does not take, is answered with an ``error`` event carrying
the HTTP ``status`` that request would have got; the connection stays open.
"""

from __future__ import annotations

import json
import secrets
import time
from collections import OrderedDict
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from mol.core import events as ev
from mol.core.errors import MolError
from mol.server.api.inputs import input_messages, responses_tools
from mol.server.api.responses import (
    ResponseReply,
    left_out,
    response_object,
    start_response,
)
from mol.server.http.bodies import parse_json
from mol.server.http.errors import ApiError, api_error
from mol.server.turns.jobs import Job

KEPT = 64
"""``store: false`` responses a connection remembers for ``previous_response_id``."""
QUIET = ("response.processed",)
"""Client events that need no answer."""


async def responses_socket(websocket: WebSocket) -> None:
    """The WebSocket route: accept, then answer each client event in turn."""
    await websocket.accept()
    connection = Connection(websocket)
    try:
        while True:
            await connection.handle(await websocket.receive_text())
    except (WebSocketDisconnect, OSError):  # the client went away (mid-stream too)
        return


def _items(value: Any) -> list[Any]:
    """A request's ``input`` as items (a string is one user message)."""
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    if not isinstance(value, list):
        raise ApiError(400, "'input' must be a string or an array of items", param="input")
    return value


def _remember(kept: OrderedDict[str, Any], key: str, value: Any) -> None:
    """Keep ``value`` under ``key``, forgetting the oldest beyond ``KEPT``."""
    kept[key] = value
    while len(kept) > KEPT:
        kept.popitem(last=False)


class Connection:
    """One client's WebSocket: its events answered in order, its ``store: false``
    responses remembered."""

    def __init__(self, websocket: WebSocket) -> None:
        self.websocket = websocket
        self.state = websocket.app.state
        self.kept: OrderedDict[str, Job] = OrderedDict()
        """Response id -> the job of a ``store: false`` response of this connection."""
        self.prepared: OrderedDict[str, tuple[Any, list[Any]]] = OrderedDict()
        """Response id -> ``instructions`` and input items of a ``generate: false`` one."""

    async def handle(self, text: str) -> None:
        """Answer one client event."""
        stream_id: str | None = None
        try:
            if len(text.encode()) > self.state.max_body:
                raise ApiError(413, f"the message exceeds the limit of {self.state.max_body} "
                               "bytes")
            event = parse_json(text.encode())
            if not isinstance(event, dict):
                raise ApiError(400, "a client event must be a JSON object")
            stream_id = event.get("stream_id") if isinstance(event.get("stream_id"),
                                                             str) else None
            kind = event.get("type")
            if kind in QUIET:
                return
            if kind != "response.create":
                raise ApiError(400, f"'type' {kind!r} is not supported: send "
                               "response.create", param="type")
            body = {k: v for k, v in event.items() if k not in ("type", "stream_id")}
            if body.get("generate") is False:
                await self.prepare(body, stream_id)
            else:
                await self.respond(body, stream_id)
        except ApiError as error:
            await self.error(error, stream_id)

    async def respond(self, body: dict[str, Any], stream_id: str | None) -> None:
        """Run one response and send its events."""
        if body.get("background") is True:
            raise ApiError(400, "'background' is not supported over a WebSocket",
                           param="background")
        previous = body.get("previous_response_id")
        follows = self.kept.get(previous) if isinstance(previous, str) else None
        if follows is not None:
            self.kept.move_to_end(previous)
        if isinstance(previous, str) and previous in self.prepared:
            instructions, items = self.prepared[previous]
            body = {**body, "previous_response_id": None,
                    "input": [*items, *_items(body.get("input"))],
                    "instructions": body.get("instructions") or instructions}
        try:
            reply = await start_response(self.state, {**body, "stream": True}, follows)
        except (ApiError, MolError) as exc:  # the runner's, in the client's words (429)
            raise api_error(exc) from None
        reply.body["previous_response_id"] = previous  # as the client named it
        extra = {"stream_id": stream_id} if stream_id is not None else {}
        reply.encode = lambda data: json.dumps({**data, **extra}, ensure_ascii=False).encode()
        try:
            await self._send(reply)
        finally:
            reply.job.delivered.set()
        if reply.completed is not None and not reply.completed["store"]:
            _remember(self.kept, reply.id, reply.job)

    async def prepare(self, body: dict[str, Any], stream_id: str | None) -> None:
        """A ``generate: false`` request: checked, its input kept, its response completed
        without output."""
        body = {**body, "model": body.get("model") or self.state.models.public}
        self.state.models.resolve(body, required=False)
        tools = responses_tools(body)
        input_messages(body, tools)  # a 400 naming the item, as for any request
        response_id = "resp_" + secrets.token_hex(16)
        _remember(self.prepared, response_id, (body.get("instructions"),
                                               _items(body.get("input"))))
        done = response_object(body, response_id, int(time.time()), "completed", [],
                               ev.TurnUsage(), left_out(tools))
        extra = {"stream_id": stream_id} if stream_id is not None else {}
        for number, (kind, response) in enumerate([
                ("response.created", {**done, "status": "in_progress", "usage": None}),
                ("response.completed", done)]):
            await self.websocket.send_text(json.dumps(
                {"type": kind, "sequence_number": number, "response": response, **extra},
                ensure_ascii=False))

    async def _send(self, reply: ResponseReply) -> None:
        items = reply.items()
        first = await anext(items)
        if isinstance(first, ApiError):
            await items.aclose()
            raise first
        async for message in reply.events(first, items):
            await self.websocket.send_text(message.decode())

    async def error(self, error: ApiError, stream_id: str | None) -> None:
        """An ``error`` event for a request that got no response."""
        event: dict[str, Any] = {"type": "error", "status": error.status,
                                 "error": {**error.body()["error"]}}
        if error.headers:
            event["headers"] = dict(error.headers)
        if stream_id is not None:
            event["stream_id"] = stream_id
        await self.websocket.send_text(json.dumps(event, ensure_ascii=False))
