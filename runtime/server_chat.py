"""``POST /v1/chat/completions``: stateless for the client, continuous for mol.

The client resends the whole history each time. mol names the point each
reply ends at by a fingerprint of the client-visible transcript (the messages
as the client sent them plus the reply as mol sent it), so the next request,
whose history minus its new last message has that fingerprint, continues the
stored conversation with its per-adapter views and summaries intact. A history
mol does not know is rebuilt: its messages become plain history in every
adapter's view. A trailing ``tool`` message answering a mol-issued call id
goes back to the adapter encoded in the id, without routing.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from mol.runtime import events as ev
from mol.runtime.server_common import ApiError, field, read_json, sse, text_of
from mol.runtime.server_runner import Job, Runner, TurnRequest
from mol.runtime.views import adapter_of_call

ROLES = ("system", "developer", "user", "assistant", "tool")


def fingerprint(messages: list[dict[str, Any]]) -> str:
    """A digest of a client-visible transcript (normalized messages)."""
    canonical = json.dumps(messages, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "chat:" + hashlib.sha256(canonical.encode()).hexdigest()


def normalize(raw: Any, where: str) -> dict[str, Any]:
    """One client message in mol's plain form, checked field by field."""
    if not isinstance(raw, dict):
        raise ApiError(400, f"'{where}' must be an object", param=where)
    role = field(raw, "role", str, required=True, where=f"{where}.")
    if role not in ROLES:
        raise ApiError(400, f"'{where}.role' must be one of {', '.join(ROLES)}; got {role!r}",
                       param=f"{where}.role")
    message: dict[str, Any] = {"role": "system" if role == "developer" else role,
                               "content": text_of(raw.get("content"), f"{where}.content")}
    if role == "tool":
        message["tool_call_id"] = field(raw, "tool_call_id", str, required=True,
                                        where=f"{where}.")
    if role == "assistant" and raw.get("tool_calls"):
        calls = field(raw, "tool_calls", list, where=f"{where}.")
        message["tool_calls"] = [_call(c, f"{where}.tool_calls[{i}]") for i, c in
                                 enumerate(calls)]
    return message


def _call(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ApiError(400, f"'{where}' must be an object", param=where)
    function = field(raw, "function", dict, required=True, where=f"{where}.")
    return {"id": field(raw, "id", str, required=True, where=f"{where}."), "type": "function",
            "function": {"name": field(function, "name", str, required=True,
                                       where=f"{where}.function."),
                         "arguments": field(function, "arguments", str, default="",
                                            where=f"{where}.function.")}}


def split(messages: list[dict[str, Any]], where: str = "messages") -> tuple[
        list[dict[str, Any]], str | None, dict[str, str] | None]:
    """``(history, user text, tool results)``: the new last message (or trailing tool
    results) separated from the history before it."""
    if not messages:
        raise ApiError(400, f"'{where}' must not be empty", param=where)
    if messages[-1]["role"] == "user":
        return messages[:-1], messages[-1]["content"], None
    if messages[-1]["role"] != "tool":
        raise ApiError(400, f"the last entry of '{where}' must be a user message or tool "
                       f"results, got role {messages[-1]['role']!r}", param=where)
    start = len(messages)
    while start > 0 and messages[start - 1]["role"] == "tool":
        start -= 1
    results: dict[str, str] = {}
    for i in range(start, len(messages)):
        call_id = messages[i]["tool_call_id"]
        if adapter_of_call(call_id) is None:
            raise ApiError(400, f"'{where}[{i}].tool_call_id' {call_id!r} was not issued by "
                           "mol (ids look like call_L2_...)", param=f"{where}[{i}].tool_call_id")
        results[call_id] = messages[i]["content"]
    return messages[:start], None, results


def client_tools(body: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The request's ``tools`` (Chat Completions shape), checked."""
    tools = field(body, "tools", list)
    if tools is None:
        return None
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, dict) or tool.get("type") != "function":
            raise ApiError(400, f"'{where}' must be an object with type 'function'", param=where)
        function = field(tool, "function", dict, required=True, where=f"{where}.")
        field(function, "name", str, required=True, where=f"{where}.function.")
    return tools


def resolve_model(body: dict[str, Any], models: list[str]) -> str | None:
    """The adapter a request pins (``L0``..``L3``), or None for the routed entry model."""
    model = field(body, "model", str, required=True)
    if model not in models:
        raise ApiError(404, f"the model {model!r} does not exist; 'model' must be one of "
                       f"{', '.join(models)}", param="model", code="model_not_found")
    return None if model == models[0] else model


async def chat_completions(request: Request) -> Response:
    """The route: validate, start the turn, answer (JSON or a stream of chunks)."""
    state = request.app.state
    body = await read_json(request, state.max_body)
    adapter = resolve_model(body, state.models)
    raw = field(body, "messages", list, required=True)
    messages = [normalize(m, f"messages[{i}]") for i, m in enumerate(raw)]
    history, text, results = split(messages)
    stream = field(body, "stream", bool, default=False)
    options = field(body, "stream_options", dict, default={})
    usage_too = field(options, "include_usage", bool, default=False, where="stream_options.")
    turn = TurnRequest(text=text, tool_results=results,
                       key=fingerprint(history) if history else None, seed=history,
                       adapter=adapter, client_tools=client_tools(body), stream=stream)
    runner: Runner = state.runner
    job = runner.start(turn)
    reply = Reply(body["model"], messages, job, runner)
    items = reply.items()
    first = await anext(items)
    if first[0] == "error":
        await items.aclose()
        return first[1].response()
    if not stream:
        try:
            return JSONResponse(await reply.complete(first, items))
        finally:
            await items.aclose()
    return StreamingResponse(reply.chunks(first, items, usage_too),
                             media_type="text/event-stream")


class Reply:
    """Turns a job's events into a chat completion or its chunks."""

    def __init__(self, model: str, messages: list[dict[str, Any]], job: Job,
                 runner: Runner) -> None:
        self.model, self.messages, self.job, self.runner = model, messages, job, runner
        self.id = "chatcmpl-" + secrets.token_hex(12)
        self.created = int(time.time())
        self.usage: dict[str, int] = {"prompt_tokens": 0, "completion_tokens": 0}
        self.sent: list[str] = []
        self.streamed_calls: set[int] = set()

    async def items(self) -> AsyncIterator[tuple[str, Any]]:
        """``delta`` texts and ``call_delta`` fragments (streaming), then one of ``answer``
        (text, stopped), ``calls`` or ``error``."""
        async for kind, value in self.job.outcomes():
            if kind == "error":
                yield "error", value
                return
            if kind == "result":
                if value.status == "waiting":
                    yield "calls", value.client_calls
                else:
                    yield "answer", (value.answer, value.stopped)
                return
            if isinstance(value, ev.ModelCalled):
                ev.add_usage(self.usage, value.usage)
            elif isinstance(value, ev.TextDelta) and self.job.request.stream:
                yield "delta", value.text
            elif isinstance(value, ev.ToolCallDelta) and self.job.request.stream:
                yield "call_delta", value
            elif isinstance(value, ev.Answered):
                yield "answer", (value.text, value.stopped)
                return

    async def finish(self, message: dict[str, Any]) -> None:
        """Name the point this reply ends at by the transcript the client now holds."""
        transcript = [*self.messages, {k: v for k, v in message.items() if v is not None}]
        if transcript[-1].get("content") is None:
            transcript[-1]["content"] = ""
        await self.runner.name(self.job, fingerprint(transcript))

    def _usage(self) -> dict[str, int]:
        return {**self.usage, "total_tokens": sum(self.usage.values())}

    async def complete(self, first: tuple[str, Any], rest: AsyncIterator) -> dict[str, Any]:
        """The non-streaming ``chat.completion`` object."""
        kind, value = first
        if kind == "error":
            raise value
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if kind == "calls":
            message["tool_calls"], finish = value, "tool_calls"
        else:
            message["content"] = value[0]
            finish = "length" if value[1] else "stop"
        await self.finish(message)
        return {"id": self.id, "object": "chat.completion", "created": self.created,
                "model": self.model, "choices": [{"index": 0, "message": message,
                                                  "finish_reason": finish, "logprobs": None}],
                "usage": self._usage()}

    def _chunk(self, delta: dict[str, Any], finish: str | None = None,
               usage_too: bool = False) -> bytes:
        chunk: dict[str, Any] = {
            "id": self.id, "object": "chat.completion.chunk", "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}
        if usage_too:
            chunk["usage"] = None
        return sse(chunk)

    async def chunks(self, first: tuple[str, Any], rest: AsyncIterator,
                     usage_too: bool) -> AsyncIterator[bytes]:
        """The streamed reply: role, content deltas as they come, tool calls, finish, usage."""
        try:
            yield self._chunk({"role": "assistant", "content": ""}, usage_too=usage_too)
            item: tuple[str, Any] | None = first
            while item is not None:
                kind, value = item
                if kind == "delta":
                    self.sent.append(value)
                    yield self._chunk({"content": value}, usage_too=usage_too)
                elif kind == "call_delta":
                    self.streamed_calls.add(value.index)
                    yield self._chunk({"tool_calls": [_call_fragment(value)]},
                                      usage_too=usage_too)
                elif kind == "error":
                    yield sse(value.body())
                    break
                else:
                    for piece in await self._final(kind, value, usage_too):
                        yield piece
                    break
                item = await anext(rest, None)
            yield sse("[DONE]")
        finally:
            # Also when the client went away mid-stream; the turn itself goes on.
            self.job.receive.close()

    async def _final(self, kind: str, value: Any, usage_too: bool) -> list[bytes]:
        pieces = []
        content = "".join(self.sent) or None
        if kind == "calls":
            # Calls already streamed fragment by fragment are not sent again.
            calls = [{"index": i, **call} for i, call in enumerate(value)
                     if i not in self.streamed_calls]
            if calls:
                pieces.append(self._chunk({"tool_calls": calls}, usage_too=usage_too))
            finish = "tool_calls"
            await self.finish({"role": "assistant", "content": content, "tool_calls": value})
        else:
            if not self.sent and value[0]:  # e.g. a stopped turn's notice: nothing streamed
                pieces.append(self._chunk({"content": value[0]}, usage_too=usage_too))
                content = value[0]
            finish = "length" if value[1] else "stop"
            await self.finish({"role": "assistant", "content": content})
        pieces.append(self._chunk({}, finish, usage_too=usage_too))
        if usage_too:
            pieces.append(sse({"id": self.id, "object": "chat.completion.chunk",
                               "created": self.created, "model": self.model, "choices": [],
                               "usage": self._usage()}))
        return pieces


def _call_fragment(delta: ev.ToolCallDelta) -> dict[str, Any]:
    """A ``delta.tool_calls`` entry: id, type and name with a call's first fragment only."""
    fragment: dict[str, Any] = {"index": delta.index}
    if delta.call_id is not None:
        fragment.update(id=delta.call_id, type="function")
    function: dict[str, Any] = {"arguments": delta.arguments}
    if delta.name is not None:
        function["name"] = delta.name
    fragment["function"] = function
    return fragment
