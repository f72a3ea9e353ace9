"""``POST /v1/messages`` and ``POST /v1/messages/count_tokens``: the Anthropic Messages API.

Stateless for the client, continuous for mol, as Chat Completions is: the client (Claude
Code, the ``anthropic`` SDKs) resends the whole conversation, whose chat-shaped transcript
names the point it continues by its fingerprint (``mol.server.api.messages``); the turn
runs through the same runner, with the same routing, tool results pinned to the adapter
that issued the calls, per-adapter views, summaries, limits and admission. The body is
read by ``requests``, the reply rendered by ``reply``.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from mol.server.api.anthropic.reply import MessageReply
from mol.server.api.anthropic.requests import conversation, message_options, message_tools
from mol.server.api.messages import transcript_turn
from mol.server.api.replies import respond
from mol.server.http.bodies import field, read_json

log = logging.getLogger("mol.server")

CHARS_PER_TOKEN = 4
"""The estimate ``count_tokens`` falls back on when the engine cannot count: a token for
every four characters of the request's messages and tools as JSON."""


async def create_message(request: Request) -> Response:
    """The route: validate, start the turn, answer (a message or its events)."""
    state = request.app.state
    body = await read_json(request, state.max_body)
    adapter = state.models.resolve(body)
    options = message_options(body, state.config.artifact.doc.engine.thinking_off)
    talk = conversation(body, state.signer)
    tools = message_tools(body)
    if tools.left_out:
        log.info("messages: left out tools mol cannot run: %s", ", ".join(tools.left_out))
    stream = field(body, "stream", bool, default=False)
    turn = transcript_turn(talk.turn, state.adapters, kind=MessageReply.kind,
                           fields=talk.fields[:len(talk.turn)], adapter=adapter,
                           client_tools=tools.tools, stream=stream, params=options.params)
    reply = MessageReply(body["model"], talk, await state.runner.start(turn), state.signer,
                         tools, options.show_thinking)
    return await respond(reply, stream, reply.complete, reply.events, state.keepalive,
                         request.scope)


async def count_tokens(request: Request) -> Response:
    """``{"input_tokens": N}``: what the engine's tokenizer counts for the request's
    ``system``, ``messages`` and ``tools`` (the adapter's own prompt and other adapters'
    summaries are not counted), or the estimate when it cannot say."""
    state = request.app.state
    body = await read_json(request, state.max_body)
    adapter = state.models.resolve(body) or state.config.artifact.doc.route_fallback
    talk = conversation(body, state.signer)
    tools = message_tools(body).tools
    counter = getattr(state.runner.runtime.engine, "count_tokens", None)
    counted = await counter(adapter, talk.messages, tools) if counter is not None else None
    return JSONResponse({"input_tokens": counted if counted is not None
                         else estimate(talk.messages, tools)})


def estimate(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> int:
    """About a token per ``CHARS_PER_TOKEN`` characters of the messages and tools."""
    text = json.dumps([tools or [], messages], ensure_ascii=False, separators=(",", ":"))
    return math.ceil(len(text) / CHARS_PER_TOKEN)
