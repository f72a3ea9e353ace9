"""``POST /v1/responses`` and ``GET /v1/responses/{id}``: state kept server-side.

Each stored response names the point of its conversation where it ended, so
``previous_response_id`` continues there (in place, or as a fork when the
conversation went on from a later response). ``store: false`` responses are
neither kept nor chainable. ``instructions`` open a conversation (a system
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
from starlette.responses import JSONResponse, Response

from mol.runtime import events as ev
from mol.runtime.server.genui import response_item
from mol.runtime.server.http import ApiError, field, read_json, sse
from mol.runtime.server.messages import chat_tools, input_messages, resolve_model, split
from mol.runtime.server.replies import Item, Outcome, Reply, respond
from mol.runtime.server.runner import Job, Runner, TurnRequest


async def create_response(request: Request) -> Response:
    """The route: validate, start the turn, answer (a response object or its events)."""
    state = request.app.state
    body = await read_json(request, state.max_body)
    adapter = resolve_model(body, state.models)
    previous = field(body, "previous_response_id", str)
    store = field(body, "store", bool, default=True)
    stream = field(body, "stream", bool, default=False)
    instructions = field(body, "instructions", str)
    history, text, results = split(input_messages(body), "input")
    if previous is not None and history:
        raise ApiError(400, "with 'previous_response_id', 'input' holds only the new user "
                       "message or function_call_output items", param="input")
    seed = ([{"role": "system", "content": instructions}] if instructions else []) + history
    turn = TurnRequest(text=text, tool_results=results, key=previous,
                       key_required=previous is not None, seed=seed, adapter=adapter,
                       client_tools=chat_tools(body), stream=stream, persist=store)
    reply = ResponseReply(body, state.runner.start(turn), state.runner)
    return await respond(reply, stream, reply.complete_response, reply.events)


async def get_response(request: Request) -> Response:
    """``GET /v1/responses/{id}``: a stored response, or 404."""
    response_id = request.path_params["response_id"]
    found = await request.app.state.runner.store.get_response(response_id)
    if found is None:
        raise ApiError(404, f"no stored response {response_id!r}", param="response_id")
    return JSONResponse(found)


class ResponseReply(Reply):
    """Turns a job's events into a Responses API object or its event stream."""

    def __init__(self, body: dict[str, Any], job: Job, runner: Runner) -> None:
        super().__init__(body["model"], job, runner)
        self.body = body
        self.id = "resp_" + secrets.token_hex(16)
        self.sequence = 0
        self.message_id = "msg_" + secrets.token_hex(12)

    def obj(self, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
        """The response object."""
        usage = None
        if status == "completed":
            usage = {"input_tokens": self.usage["prompt_tokens"],
                     "input_tokens_details": {"cached_tokens": 0},
                     "output_tokens": self.usage["completion_tokens"],
                     "output_tokens_details": {"reasoning_tokens": 0},
                     "total_tokens": sum(self.usage.values())}
        return {"id": self.id, "object": "response", "created_at": self.created,
                "status": status, "model": self.model, "output": output, "error": None,
                "incomplete_details": None, "instructions": self.body.get("instructions"),
                "metadata": {}, "parallel_tool_calls": True, "temperature": None,
                "top_p": None, "tool_choice": "auto", "tools": self.body.get("tools") or [],
                "previous_response_id": self.body.get("previous_response_id"),
                "store": self.body.get("store", True) is not False,
                "text": {"format": {"type": "text"}}, "truncation": "disabled",
                "usage": usage}

    def message_item(self, text: str, status: str = "completed") -> dict[str, Any]:
        content = [] if status != "completed" else [
            {"type": "output_text", "text": text, "annotations": []}]
        return {"type": "message", "id": self.message_id, "status": status,
                "role": "assistant", "content": content}

    @staticmethod
    def call_item(call: dict[str, Any], arguments: str | None = None,
                  status: str = "completed") -> dict[str, Any]:
        function = call["function"]
        return {"type": "function_call", "id": "fc_" + call["id"].split("_", 2)[-1],
                "call_id": call["id"], "name": function["name"],
                "arguments": function["arguments"] if arguments is None else arguments,
                "status": status}

    async def finish_response(self, output: list[dict[str, Any]]) -> dict[str, Any]:
        """The completed object, stored (and its point named) unless ``store`` is false."""
        final = self.obj("completed", output)
        if final["store"]:
            await self.runner.name(self.job, self.id,
                                   (self.body.get("previous_response_id"), final))
        return final

    async def complete_response(self, outcome: Outcome) -> dict[str, Any]:
        """The non-streaming response object."""
        if isinstance(outcome, ApiError):
            raise outcome
        if isinstance(outcome, ev.ClientToolsRequested):
            return await self.finish_response([self.call_item(c) for c in outcome.calls])
        return await self.finish_response([self.message_item(outcome.text),
                                           *self._genui_items()])

    def _genui_items(self) -> list[dict[str, Any]]:
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
        finally:
            self.job.receive.close()  # also when the client went away mid-stream

    async def _events(self, first: Item, rest: AsyncIterator[Item]) -> AsyncIterator[bytes]:
        yield self.event("response.created", response=self.obj("in_progress", []))
        yield self.event("response.in_progress", response=self.obj("in_progress", []))
        text: list[str] = []
        output: list[dict[str, Any]] = []
        item: Item | None = first
        while item is not None:
            if isinstance(item, ApiError):
                yield self.event("error", error=item.body()["error"],
                                 message=item.message, code=item.code, param=item.param)
                break
            delta = (item.text if isinstance(item, ev.TextDelta) else
                     item.text if isinstance(item, ev.Answered) and not text else "")
            if delta:
                if not text:
                    for piece in self._open_message():
                        yield piece
                text.append(delta)
                yield self.event("response.output_text.delta", item_id=self.message_id,
                                 output_index=0, content_index=0, delta=delta, logprobs=[])
            if isinstance(item, ev.Answered | ev.ClientToolsRequested):
                for piece in self._close(item, "".join(text), output):
                    yield piece
                final = await self.finish_response(output)
                yield self.event("response.completed", response=final)
                break
            item = await anext(rest, None)

    def _open_message(self) -> list[bytes]:
        part = {"type": "output_text", "text": "", "annotations": []}
        return [self.event("response.output_item.added", output_index=0,
                           item=self.message_item("", "in_progress")),
                self.event("response.content_part.added", item_id=self.message_id,
                           output_index=0, content_index=0, part=part)]

    def _close(self, outcome: ev.Answered | ev.ClientToolsRequested, text: str,
               output: list[dict[str, Any]]) -> list[bytes]:
        pieces = []
        if text:
            part = {"type": "output_text", "text": text, "annotations": []}
            output.append(self.message_item(text))
            pieces += [
                self.event("response.output_text.done", item_id=self.message_id,
                           output_index=0, content_index=0, text=text, logprobs=[]),
                self.event("response.content_part.done", item_id=self.message_id,
                           output_index=0, content_index=0, part=part),
                self.event("response.output_item.done", output_index=0, item=output[-1])]
        calls = outcome.calls if isinstance(outcome, ev.ClientToolsRequested) else []
        for item in [] if calls else self._genui_items():
            output.append(item)
            pieces += [self.event("response.output_item.added", output_index=len(output) - 1,
                                  item=item),
                       self.event("response.output_item.done", output_index=len(output) - 1,
                                  item=item)]
        for call in calls:
            index, done = len(output), self.call_item(call)
            output.append(done)
            pieces += [
                self.event("response.output_item.added", output_index=index,
                           item=self.call_item(call, "", "in_progress")),
                self.event("response.function_call_arguments.delta", item_id=done["id"],
                           output_index=index, delta=done["arguments"]),
                self.event("response.function_call_arguments.done", item_id=done["id"],
                           output_index=index, arguments=done["arguments"], name=done["name"]),
                self.event("response.output_item.done", output_index=index, item=done)]
        return pieces
