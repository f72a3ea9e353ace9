"""``POST /v1/responses``: state kept server-side.

Each stored response names the point of its conversation where it ended, so
``previous_response_id`` continues there (in place, or as a fork when the
conversation went on from a later response). A request without it whose input
replays a stored conversation (as the OpenAI Agents SDK does, resending every
item) continues it too: a stored response is also named by a fingerprint of
the transcript it ends (``instructions``, the input, its output). ``store:
false`` responses are neither kept nor chainable. ``instructions`` open a conversation (a system
message after the adapter's own prompt, so that prompt stays byte-stable); on a
chained request they are recorded in the response but the conversation keeps
its opening instructions: changing them mid-conversation would break the
adapters' prefix caches.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from mol.core import events as ev
from mol.core.errors import TurnCancelled
from mol.server.api.genui import response_item
from mol.server.api.inputs import (
    ClientTools,
    input_items,
    input_messages,
    item_messages,
    responses_tools,
)
from mol.server.api.messages import fingerprint, resolve_model, split
from mol.server.api.params import responses_params
from mol.server.api.replies import Item, Outcome, Reply, respond
from mol.server.http.bodies import field, read_json
from mol.server.http.errors import ApiError, api_error
from mol.server.http.sse import KEEPALIVE_COMMENT, sse
from mol.server.turns.jobs import Job, KeepAlive, TurnRequest

INPUT_KEY = "mol_input_items"
"""Where a stored response keeps its request's input items (``GET .../input_items``); the
response object clients read never shows it."""


async def create_response(request: Request) -> Response:
    """The route: validate, start the turn, answer (a response object or its events)."""
    state = request.app.state
    body = await read_json(request, state.max_body)
    adapter = resolve_model(body, state.models, required=False)
    if body.get("conversation") is not None:
        raise ApiError(400, "'conversation' is not supported: chain responses with "
                       "'previous_response_id', or send the whole input", param="conversation")
    previous = field(body, "previous_response_id", str)
    store = field(body, "store", bool, default=True)
    stream = field(body, "stream", bool, default=False)
    instructions = field(body, "instructions", str)
    tools = responses_tools(body)
    messages, fields = input_messages(body, tools)
    history, text, results, named = split(messages, state.adapters, "input", fields)
    if previous is not None and history:
        raise ApiError(400, "with 'previous_response_id', 'input' holds only the new user "
                       "message or function_call_output items", param="input")
    opening = [{"role": "system", "content": instructions}] if instructions else []
    seed = opening + history
    # Unchained, the input replays the conversation so far: its transcript names the point.
    key = previous if previous is not None else (
        fingerprint(seed, "resp") if history else None)
    response_id = "resp_" + secrets.token_hex(16)
    turn = TurnRequest(text=text, tool_results=results, result_fields=named, where="input",
                       key=key, key_required=previous is not None, seed=seed,
                       seed_fields=["instructions"] * len(opening) + fields[:len(history)],
                       adapter=adapter, client_tools=tools.tools, stream=stream,
                       persist=store, params=responses_params(body), handle=response_id)
    reply = ResponseReply({**body, "model": body.get("model") or state.models[0]},
                          await state.runner.start(turn), response_id, tools,
                          None if previous is not None else [*opening, *messages])
    return await respond(reply, stream, reply.complete_response, reply.events,
                         state.keepalive)


class ResponseReply(Reply):
    """Turns a job's events into a Responses API object or its event stream."""

    renders_cancelled = True

    def __init__(self, body: dict[str, Any], job: Job, response_id: str,
                 tools: ClientTools, transcript: list[dict[str, Any]] | None) -> None:
        super().__init__(body["model"], job)
        self.body = body
        self.id = response_id
        self.tools = tools
        self.transcript = transcript
        """The conversation the request replays (``instructions`` and input as messages),
        or None when it is chained by ``previous_response_id``."""
        self.sequence = 0
        self.message_id = "msg_" + secrets.token_hex(12)
        job.render = lambda status: self.obj(status, [])

    def obj(self, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
        """The response object."""
        usage = None
        if status == "completed":
            used = self.usage
            usage = {"input_tokens": used.prompt_tokens,
                     # The engine's prefix cache reports hits, never writes (it bills none).
                     "input_tokens_details": {"cached_tokens": used.cached_tokens,
                                              "cache_write_tokens": 0},
                     "output_tokens": used.completion_tokens,
                     "output_tokens_details": {"reasoning_tokens": 0},
                     "total_tokens": used.prompt_tokens + used.completion_tokens}
        metadata = self.body.get("metadata")
        left_out = ({"mol_tools_left_out": ", ".join(self.tools.left_out)}
                    if self.tools.left_out else {})
        return {"id": self.id, "object": "response", "created_at": self.created,
                "status": status, "model": self.model, "output": output, "error": None,
                "incomplete_details": None, "instructions": self.body.get("instructions"),
                "metadata": {**(metadata if isinstance(metadata, dict) else {}),
                             **self.metadata(), **left_out},
                "parallel_tool_calls": self.body.get("parallel_tool_calls") is not False,
                "temperature": self.body.get("temperature"), "top_p": self.body.get("top_p"),
                "tool_choice": self.body.get("tool_choice") or "auto",
                "tools": self.body.get("tools") or [],
                "previous_response_id": self.body.get("previous_response_id"),
                "store": self.body.get("store", True) is not False,
                "text": {"format": {"type": "text"}}, "truncation": "disabled",
                "usage": usage}

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

    async def finish_response(self, output: list[dict[str, Any]]) -> dict[str, Any]:
        """The completed object, stored (and its point named, by its id and by the
        transcript it ends) unless ``store`` is false."""
        final = self.obj("completed", output)
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
        output = ([self.reasoning_item("rs_" + secrets.token_hex(12), outcome.reasoning)]
                  if outcome.reasoning else [])
        if isinstance(outcome, ev.ClientToolsRequested):
            return await self.finish_response([*output,
                                               *(self.call_item(c) for c in outcome.calls)])
        return await self.finish_response([*output, self.message_item(outcome.text),
                                           *self.genui_items()])

    def genui_items(self) -> list[dict[str, Any]]:
        """The ``mol.genui`` output item, when the turn checked generated UI."""
        item = response_item(self.genui)
        return [] if item is None else [item]

    def event(self, kind: str, **data: Any) -> bytes:
        """One Responses streaming event, numbered."""
        self.sequence += 1
        return sse({"type": kind, "sequence_number": self.sequence - 1, **data}, event=kind)

    async def events(self, first: Item, rest: AsyncIterator[Item]) -> AsyncIterator[bytes]:
        """``response.created`` .. ``response.completed`` as the turn produces them."""
        try:
            async for piece in self._events(first, rest):
                yield piece
            self.finished = True
        finally:
            self.gone("response")
            self.job.receive.close()  # also when the client went away mid-stream

    async def _events(self, first: Item, rest: AsyncIterator[Item]) -> AsyncIterator[bytes]:
        yield self.event("response.created", response=self.obj("in_progress", []))
        yield self.event("response.in_progress", response=self.obj("in_progress", []))
        stream = _OutputStream(self)
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
                yield self.event("error", error=item.body()["error"],
                                 message=item.message, code=item.code, param=item.param)
                break
            if isinstance(item, ev.ReasoningDelta):
                for piece in stream.reasoning(item.text):
                    yield piece
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


class _OutputStream:
    """The output items of one streamed response as they open, grow and close: reasoning
    items (one per run of reasoning), the message, then the client's function calls."""

    def __init__(self, reply: ResponseReply) -> None:
        self.reply = reply
        self.items: list[dict[str, Any]] = []
        """Output items in ``output_index`` order (completed ones in their final form)."""
        self.text: list[str] = []
        self.message_index: int | None = None
        self.thought: tuple[int, list[str]] | None = None
        """The open reasoning item: its index and its text so far."""

    def output(self) -> list[dict[str, Any]]:
        """The completed output items."""
        return list(self.items)

    def _open(self, item: dict[str, Any]) -> tuple[int, bytes]:
        self.items.append(item)
        index = len(self.items) - 1
        return index, self.reply.event("response.output_item.added", output_index=index,
                                       item=item)

    def reasoning(self, delta: str) -> list[bytes]:
        pieces = []
        if self.thought is None:
            index, added = self._open(self.reply.reasoning_item(
                "rs_" + secrets.token_hex(12), "", "in_progress"))
            self.thought, pieces = (index, []), [added]
        index, parts = self.thought
        parts.append(delta)
        pieces.append(self.reply.event("response.reasoning_text.delta",
                                       item_id=self.items[index]["id"], output_index=index,
                                       content_index=0, delta=delta))
        return pieces

    def _close_reasoning(self) -> list[bytes]:
        if self.thought is None:
            return []
        index, parts = self.thought
        self.thought = None
        item_id, text = self.items[index]["id"], "".join(parts)
        self.items[index] = done = self.reply.reasoning_item(item_id, text)
        return [self.reply.event("response.reasoning_text.done", item_id=item_id,
                                 output_index=index, content_index=0, text=text),
                self.reply.event("response.output_item.done", output_index=index, item=done)]

    def text_delta(self, delta: str) -> list[bytes]:
        reply, pieces = self.reply, self._close_reasoning()
        if self.message_index is None:
            self.message_index, added = self._open(reply.message_item("", "in_progress"))
            part = {"type": "output_text", "text": "", "annotations": []}
            pieces += [added, reply.event("response.content_part.added",
                                          item_id=reply.message_id,
                                          output_index=self.message_index, content_index=0,
                                          part=part)]
        self.text.append(delta)
        pieces.append(reply.event("response.output_text.delta", item_id=reply.message_id,
                                  output_index=self.message_index, content_index=0,
                                  delta=delta, logprobs=[]))
        return pieces

    def close(self, outcome: ev.Answered | ev.ClientToolsRequested) -> list[bytes]:
        reply, pieces = self.reply, self._close_reasoning()
        if self.message_index is not None:
            index, text = self.message_index, "".join(self.text)
            part = {"type": "output_text", "text": text, "annotations": []}
            self.items[index] = done = reply.message_item(text)
            pieces += [
                reply.event("response.output_text.done", item_id=reply.message_id,
                            output_index=index, content_index=0, text=text, logprobs=[]),
                reply.event("response.content_part.done", item_id=reply.message_id,
                            output_index=index, content_index=0, part=part),
                reply.event("response.output_item.done", output_index=index, item=done)]
        calls = outcome.calls if isinstance(outcome, ev.ClientToolsRequested) else []
        for item in [] if calls else reply.genui_items():
            index, added = self._open(item)
            pieces += [added, reply.event("response.output_item.done", output_index=index,
                                          item=item)]
        for call in calls:
            done = reply.call_item(call)
            index, added = self._open(reply.call_item(call, "", "in_progress"))
            self.items[index] = done
            pieces += [
                added,
                reply.event("response.function_call_arguments.delta", item_id=done["id"],
                            output_index=index, delta=done["arguments"]),
                reply.event("response.function_call_arguments.done", item_id=done["id"],
                            output_index=index, arguments=done["arguments"],
                            name=done["name"]),
                reply.event("response.output_item.done", output_index=index, item=done)]
        return pieces
