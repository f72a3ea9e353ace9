"""``POST /v1/responses``: state kept server-side.

Each stored response names the point of its conversation where it ended, so
``previous_response_id`` continues there (in place, or as a fork when the
conversation went on from a later response). A request without it whose input
replays a stored conversation (as the OpenAI Agents SDK does, resending every
item) continues it too: a stored response is also named by a fingerprint of
the transcript it ends (``instructions``, the input, its output). ``store:
false`` responses are neither kept nor chainable. A call of an ``ask`` tool ends the
response with an ``mcp_approval_request`` item; the client answers it with an
``mcp_approval_response`` input item (``mol.server.turns.approvals``). ``instructions``
open a conversation (a system message after the adapter's own prompt, so that prompt
stays byte-stable); on a chained request they are recorded in the response but the
conversation keeps its opening instructions: changing them mid-conversation would break
the adapters' prefix caches.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from mol.core import events as ev
from mol.core.errors import TurnCancelled
from mol.server.api.compaction import continued, seal, threshold
from mol.server.api.genui import response_item
from mol.server.api.inputs import (
    ClientTools,
    input_items,
    input_messages,
    item_messages,
    responses_tools,
)
from mol.server.api.messages import fingerprint, split
from mol.server.api.output import OutputStream
from mol.server.api.params import responses_params
from mol.server.api.replies import Item, Outcome, Reply, respond
from mol.server.http.bodies import field, read_json
from mol.server.http.errors import ApiError, api_error
from mol.server.http.sse import KEEPALIVE_COMMENT, sse
from mol.server.turns.approvals import request_fields
from mol.server.turns.jobs import Job, KeepAlive, TurnRequest

INPUT_KEY = "mol_input_items"
"""Where a stored response keeps its request's input items (``GET .../input_items``); the
response object clients read never shows it."""


async def create_response(request: Request) -> Response:
    """The route: validate, start the turn, answer (a response object or its events)."""
    state = request.app.state
    reply = await start_response(state, await read_json(request, state.max_body))
    return await respond(reply, reply.stream, reply.complete_response, reply.events,
                         state.keepalive)


async def start_response(state: Any, body: dict[str, Any],
                         follows: Job | None = None) -> ResponseReply:
    """Check a Responses body and start its turn (over HTTP or a WebSocket); its reply.
    ``follows``: the job of the response ``previous_response_id`` names when the client's
    connection keeps it in memory."""
    turn, facts = turn_request(body, state, follows=follows)
    return ResponseReply({**body, "model": body.get("model") or state.models.public},
                         await state.runner.start(turn), turn.handle, facts["tools"],
                         facts["transcript"], state.compaction_secret)


def turn_request(body: dict[str, Any], state: Any, *, compact: bool = False,
                 follows: Job | None = None) -> tuple[TurnRequest, dict[str, Any]]:
    """The turn a Responses request body asks for (``compact``: a compaction of the
    conversation it continues, ``POST /v1/responses/compact``; ``follows``: see
    ``start_response``), and what its reply needs: the client's ``tools`` and the
    ``transcript`` the input replays (None when chained)."""
    adapter = state.models.resolve(body, required=False)
    if body.get("conversation") is not None:
        raise ApiError(400, "'conversation' is not supported: chain responses with "
                       "'previous_response_id', or send the whole input", param="conversation")
    body, compacted = continued(body, state.compaction_secret)
    previous = field(body, "previous_response_id", str)
    store = field(body, "store", bool, default=True)
    stream = field(body, "stream", bool, default=False)
    instructions = field(body, "instructions", str)
    tools = responses_tools(body)
    if compact and body.get("input") is None:  # the chained conversation alone
        body = {**body, "input": []}
    messages, fields = input_messages(body, tools)
    if compact:  # every item is the conversation to compact: no new turn
        history, text, results, named = messages, None, None, {}
    else:
        history, text, results, named = split(messages, state.adapters, "input", fields)
    chained = previous if previous is not None else compacted
    if chained is not None and history:
        raise ApiError(400, "with 'previous_response_id' or a compaction item, 'input' holds "
                       "only the new user message or function_call_output items",
                       param="input")
    opening = [{"role": "system", "content": instructions}] if instructions else []
    seed = opening + history
    # Unchained, the input replays the conversation so far: its transcript names the point.
    key = None if follows is not None else chained if chained is not None else (
        fingerprint(seed, "resp") if history else None)
    answers = {item.get("approval_request_id") for item in body.get("input") or []
               if isinstance(item, dict) and item.get("type") == "mcp_approval_response"}
    turn = TurnRequest(text=text, tool_results=results, result_fields=named, where="input",
                       key=key, key_required=follows is None and chained is not None,
                       seed=seed, follows=follows,
                       seed_fields=["instructions"] * len(opening) + fields[:len(history)],
                       adapter=adapter, client_tools=tools.tools, stream=stream,
                       persist=store or compact, params=responses_params(body),
                       handle="resp_" + secrets.token_hex(16), compact=compact,
                       compact_at=threshold(body), approve="items",
                       approval_answers={a for a in answers if isinstance(a, str)})
    transcript = None if chained is not None else [*opening, *messages]
    return turn, {"tools": tools, "transcript": transcript}


def response_object(body: dict[str, Any], response_id: str, created: int, status: str,
                    output: list[dict[str, Any]], used: ev.TurnUsage,
                    metadata: dict[str, str]) -> dict[str, Any]:
    """The response object of the request ``body`` in ``status``, with ``output``, ``used``
    (reported once completed) and mol's ``metadata`` merged into the request's own."""
    own = body.get("metadata")
    return {"id": response_id, "object": "response", "created_at": created,
            "status": status, "model": body["model"], "output": output, "error": None,
            "incomplete_details": None, "instructions": body.get("instructions"),
            "metadata": {**(own if isinstance(own, dict) else {}), **metadata},
            "parallel_tool_calls": body.get("parallel_tool_calls") is not False,
            "temperature": body.get("temperature"), "top_p": body.get("top_p"),
            "tool_choice": body.get("tool_choice") or "auto",
            "tools": body.get("tools") or [],
            "previous_response_id": body.get("previous_response_id"),
            "store": body.get("store", True) is not False,
            "text": {"format": {"type": "text"}}, "truncation": "disabled",
            "usage": usage_object(used) if status == "completed" else None}


def usage_object(used: ev.TurnUsage) -> dict[str, Any]:
    """A Responses ``usage`` object (a response's, a compaction's)."""
    return {"input_tokens": used.prompt_tokens,
            # The engine's prefix cache reports hits, never writes (it bills none).
            "input_tokens_details": {"cached_tokens": used.cached_tokens,
                                     "cache_write_tokens": 0},
            "output_tokens": used.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": used.prompt_tokens + used.completion_tokens}


def left_out(tools: ClientTools) -> dict[str, str]:
    """``metadata.mol_tools_left_out``: the hosted tools mol left out, if any."""
    return {"mol_tools_left_out": ", ".join(tools.left_out)} if tools.left_out else {}


class ResponseReply(Reply):
    """Turns a job's events into a Responses API object or its event stream."""

    noun = "response"
    renders_cancelled = True
    shows_compaction = True
    renders_approvals = True

    def __init__(self, body: dict[str, Any], job: Job, response_id: str,
                 tools: ClientTools, transcript: list[dict[str, Any]] | None,
                 secret: bytes = b"") -> None:
        super().__init__(body["model"], job)
        self.secret = secret
        """Seals the ``compaction`` items of a turn that compacted (``mol.server.api.compaction``)."""
        self.body = body
        self.id = response_id
        self.tools = tools
        self.transcript = transcript
        """The conversation the request replays (``instructions`` and input as messages),
        or None when it is chained by ``previous_response_id``."""
        self.stream = body.get("stream") is True
        self.sequence = 0
        self.message_id = "msg_" + secrets.token_hex(12)
        self.completed: dict[str, Any] | None = None
        """The completed response object, once it is known."""
        self.encode: Callable[[dict[str, Any]], bytes] = lambda data: sse(
            data, event=data["type"])
        """How one streaming event goes out: a server-sent event, or a WebSocket message."""
        job.render = lambda status: self.obj(status, [])

    def obj(self, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
        """The response object."""
        return response_object(self.body, self.id, self.created, status, output, self.usage,
                               {**self.metadata(), **left_out(self.tools)})

    def message_item(self, text: str, status: str = "completed") -> dict[str, Any]:
        """The assistant message output item."""
        content = [] if status != "completed" else [
            {"type": "output_text", "text": text, "annotations": []}]
        return {"type": "message", "id": self.message_id, "status": status,
                "role": "assistant", "content": content}

    @staticmethod
    def reasoning_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
        """A ``reasoning`` output item carrying the engine's reasoning text."""
        content = [] if status != "completed" else [{"type": "reasoning_text", "text": text}]
        return {"type": "reasoning", "id": item_id, "summary": [], "content": content,
                "status": status}

    def call_item(self, call: dict[str, Any], arguments: str | None = None,
                  status: str = "completed") -> dict[str, Any]:
        """A ``function_call`` output item for a call the client runs (with the namespace
        of a function the client grouped under one)."""
        function = call["function"]
        return {"type": "function_call", "id": "fc_" + call["id"].rsplit("_", 1)[-1],
                "call_id": call["id"], **self.tools.call_fields(function["name"]),
                "arguments": function["arguments"] if arguments is None else arguments,
                "status": status}

    @staticmethod
    def approval_item(asked: dict[str, Any]) -> dict[str, Any]:
        """An ``mcp_approval_request`` output item: a call of an ``ask`` tool waiting for a
        person's approval (its id is the call's)."""
        return {"type": "mcp_approval_request", "id": asked["id"], **request_fields(asked)}

    async def finish_response(self, output: list[dict[str, Any]]) -> dict[str, Any]:
        """The completed object, stored (and its point named, by its id and by the
        transcript it ends) unless ``store`` is false."""
        final = self.completed = self.obj("completed", output)
        if final["store"]:
            aliases = () if self.transcript is None else (fingerprint(
                [*self.transcript, *item_messages(output, self.tools, "output")[0]], "resp"),)
            stored = {**final, INPUT_KEY: input_items(self.body)}
            await self.job.ends_at(self.id, (self.body.get("previous_response_id"), stored),
                                   aliases)
        return final

    async def complete_response(self, outcome: Outcome) -> dict[str, Any]:
        """The non-streaming response object."""
        if isinstance(outcome, TurnCancelled):
            return self.obj("cancelled", [])
        if isinstance(outcome, ApiError):
            raise outcome
        output = [self.compaction_item() for _ in range(self.compactions)]
        if outcome.reasoning:
            output.append(self.reasoning_item("rs_" + secrets.token_hex(12), outcome.reasoning))
        if isinstance(outcome, ev.ClientToolsRequested):
            return await self.finish_response([*output,
                                               *(self.call_item(c) for c in outcome.calls),
                                               *map(self.approval_item, outcome.asked)])
        return await self.finish_response([*output, self.message_item(outcome.text),
                                           *self.genui_items()])

    def compaction_item(self, item_id: str | None = None,
                        done: bool = True) -> dict[str, Any]:
        """A ``compaction`` output item: its token continues the conversation from where
        this response ends (``mol.server.api.compaction``)."""
        return {"type": "compaction", "id": item_id or "cmp_" + secrets.token_hex(12),
                "encrypted_content": seal(self.secret, self.id) if done else ""}

    def genui_items(self) -> list[dict[str, Any]]:
        """The ``mol.genui`` output item, when the turn checked generated UI."""
        item = response_item(self.genui)
        return [] if item is None else [item]

    def event(self, kind: str, **data: Any) -> bytes:
        """One Responses streaming event, numbered."""
        self.sequence += 1
        return self.encode({"type": kind, "sequence_number": self.sequence - 1, **data})

    async def pieces(self, first: Item, rest: AsyncIterator[Item]) -> AsyncIterator[bytes]:
        """``response.created`` .. ``response.completed`` as the turn produces them."""
        yield self.event("response.created", response=self.obj("in_progress", []))
        yield self.event("response.in_progress", response=self.obj("in_progress", []))
        stream = OutputStream(self)
        item: Item | None = first
        while item is not None:
            if isinstance(item, KeepAlive):
                yield KEEPALIVE_COMMENT
            elif isinstance(item, TurnCancelled):
                cancelled = api_error(item)
                yield self.event("response.failed", response={
                    **self.obj("cancelled", stream.output()), "error": {
                        "code": cancelled.code, "message": cancelled.message}})
                break
            elif isinstance(item, ApiError):
                yield self.event("error", error=item.body()["error"], status=item.status,
                                 message=item.message, code=item.code, param=item.param)
                break
            if isinstance(item, ev.ReasoningDelta):
                for piece in stream.reasoning(item.text):
                    yield piece
            elif isinstance(item, ev.Compacting | ev.Compacted):
                for piece in stream.compaction(item):
                    yield piece
                item = await anext(rest, None)
                continue
            text = (item.text if isinstance(item, ev.TextDelta) else
                    item.text if isinstance(item, ev.Answered) and not stream.text else "")
            for piece in stream.text_delta(text) if text else ():
                yield piece
            if isinstance(item, ev.Answered | ev.ClientToolsRequested):
                for piece in stream.close(item):
                    yield piece
                final = await self.finish_response(stream.output())
                yield self.event("response.completed", response=final)
                break
            item = await anext(rest, None)
