"""``POST /v1/chat/completions``: stateless for the client, continuous for mol.

The client resends the whole history each time. mol names the point each
reply ends at by a fingerprint of the client-visible transcript (the messages
as the client sent them plus the reply as mol sent it), so the next request,
whose history minus its new last message has that fingerprint, continues the
stored conversation with its per-adapter views and summaries intact. A history
mol does not know is rebuilt: its messages become plain history in every
adapter's view. A trailing ``tool`` message answering a mol-issued call id
goes back to the adapter encoded in the id, without routing.

A client may name the conversation itself, by an id of its choice in the
``X-Conversation-Id`` header (16 to 128 characters among ``A-Za-z0-9._~-``): the request
then continues that stored conversation whatever its history says (only its last user
message or tool results are read), or starts it under that id, seeded with the history;
the reply carries the header back.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from mol.core import events as ev
from mol.server.api.genui import chat_metadata
from mol.server.api.messages import (
    MAX_MESSAGES,
    bounded,
    client_tools,
    normalize,
    transcript_turn,
)
from mol.server.api.params import chat_params
from mol.server.api.replies import Item, Outcome, TranscriptReply, respond
from mol.server.http.bodies import field, read_json
from mol.server.http.errors import ApiError
from mol.server.http.sse import KEEPALIVE_COMMENT, sse
from mol.server.turns.jobs import Job, KeepAlive


async def chat_completions(request: Request) -> Response:
    """The route: validate, start the turn, answer (JSON or a stream of chunks)."""
    state = request.app.state
    body = await read_json(request, state.max_body)
    adapter = state.models.resolve(body)
    raw = bounded(field(body, "messages", list, required=True), "messages", MAX_MESSAGES)
    messages = [normalize(m, f"messages[{i}]") for i, m in enumerate(raw)]
    stream = field(body, "stream", bool, default=False)
    options = field(body, "stream_options", dict, default={})
    usage_too = field(options, "include_usage", bool, default=False, where="stream_options.")
    named = conversation_id(request)
    turn = transcript_turn(messages, state.adapters, adapter=adapter,
                           client_tools=client_tools(body), stream=stream,
                           params=chat_params(body),
                           conversation=STORED_PREFIX + named if named else None)
    reply = ChatReply(body["model"], messages, await state.runner.start(turn), usage_too)
    reply.named = named
    return await respond(reply, stream, reply.complete, reply.events, state.keepalive)


CONVERSATION_HEADER = "X-Conversation-Id"
"""The request header naming, by an id of the client's choice, the conversation a request
continues; the reply echoes it."""
CONVERSATION_ID = re.compile(r"^[A-Za-z0-9._~-]{16,128}$")
"""What such an id may be (the reference MoL proxy's rule): 16 to 128 URL-safe characters."""
STORED_PREFIX = "xconv_"
"""The stored conversation's id is this prefix and the client's id (apart from mol's own
``conv_`` ids)."""


def conversation_id(request: Request) -> str | None:
    """The request's ``X-Conversation-Id``, checked; None without one."""
    value = request.headers.get(CONVERSATION_HEADER)
    if value is not None and not CONVERSATION_ID.fullmatch(value):
        raise ApiError(400, f"'{CONVERSATION_HEADER}' must be 16 to 128 characters among "
                            "A-Z a-z 0-9 . _ ~ -", param=CONVERSATION_HEADER)
    return value


class ChatReply(TranscriptReply):
    """A turn's events as a ``chat.completion`` or its chunks."""

    id_prefix = "chatcmpl-"
    noun = "chat completion"

    def __init__(self, model: str, messages: list[dict[str, Any]], job: Job,
                 usage_too: bool = False) -> None:
        super().__init__(model, messages, job)
        self.usage_too = usage_too
        """A stream's chunks carry ``usage`` (``stream_options.include_usage``)."""
        self.sent: list[str] = []
        self.streamed_calls: set[int] = set()
        self.named: str | None = None
        """The client's ``X-Conversation-Id``, echoed in the reply's headers."""

    def headers(self) -> dict[str, str]:
        """The turn's headers, and the client's ``X-Conversation-Id`` back."""
        headers = super().headers()
        return {**headers, CONVERSATION_HEADER: self.named} if self.named else headers

    def _usage(self) -> dict[str, Any]:
        usage = self.usage
        return {"prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "total_tokens": usage.prompt_tokens + usage.completion_tokens,
                "prompt_tokens_details": {"cached_tokens": usage.cached_tokens}}

    async def complete(self, outcome: Outcome) -> dict[str, Any]:
        """The non-streaming ``chat.completion`` object."""
        if isinstance(outcome, ApiError):
            raise outcome
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if isinstance(outcome, ev.ClientToolsRequested):
            message["tool_calls"], finish = outcome.calls, "tool_calls"
        else:
            message["content"] = outcome.text
            finish = _finish_reason(outcome.stopped)
        await self.finish(message)  # the client's transcript: the reasoning is not sent back
        if outcome.reasoning:
            message["reasoning_content"] = outcome.reasoning
        return {"id": self.id, "object": "chat.completion", "created": self.created,
                "model": self.model, "choices": [{"index": 0, "message": message,
                                                  "finish_reason": finish, "logprobs": None}],
                "usage": self._usage(), "metadata": self._metadata()}

    def _metadata(self) -> dict[str, Any]:
        """mol's ``metadata``: the adapter and route, and the generated UI when checked."""
        return {**self.metadata(), **(chat_metadata(self.genui) if self.genui else {})}

    def _chunk(self, delta: dict[str, Any], finish: str | None = None,
               usage_too: bool = False) -> bytes:
        chunk: dict[str, Any] = {
            "id": self.id, "object": "chat.completion.chunk", "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}
        if usage_too:
            chunk["usage"] = None
        if finish is not None:
            chunk["metadata"] = self._metadata()
        return sse(chunk)

    async def pieces(self, first: Item, rest: AsyncIterator[Item]) -> AsyncIterator[bytes]:
        """The streamed reply: role, content deltas as they come, tool calls, finish, usage."""
        usage_too = self.usage_too
        yield self._chunk({"role": "assistant", "content": ""}, usage_too=usage_too)
        item: Item | None = first
        while item is not None:
            if isinstance(item, KeepAlive):
                yield KEEPALIVE_COMMENT
            elif isinstance(item, ev.ReasoningDelta):
                yield self._chunk({"reasoning_content": item.text}, usage_too=usage_too)
            elif isinstance(item, ev.TextDelta):
                self.sent.append(item.text)
                yield self._chunk({"content": item.text}, usage_too=usage_too)
            elif isinstance(item, ev.ToolCallDelta):
                self.streamed_calls.add(item.index)
                yield self._chunk({"tool_calls": [_call_fragment(item)]},
                                  usage_too=usage_too)
            elif isinstance(item, ApiError):
                yield sse(item.body())
                break
            else:
                for piece in await self._final(item, usage_too):
                    yield piece
                break
            item = await anext(rest, None)
        yield sse("[DONE]")

    async def _final(self, outcome: ev.Answered | ev.ClientToolsRequested,
                     usage_too: bool) -> list[bytes]:
        pieces = []
        content = "".join(self.sent) or None
        if isinstance(outcome, ev.ClientToolsRequested):
            # Calls already streamed fragment by fragment are not sent again.
            calls = [{"index": i, **call} for i, call in enumerate(outcome.calls)
                     if i not in self.streamed_calls]
            if calls:
                pieces.append(self._chunk({"tool_calls": calls}, usage_too=usage_too))
            finish = "tool_calls"
            await self.finish({"role": "assistant", "content": content,
                               "tool_calls": outcome.calls})
        else:
            if not self.sent and outcome.text:  # e.g. a stopped turn's notice: nothing streamed
                pieces.append(self._chunk({"content": outcome.text}, usage_too=usage_too))
                content = outcome.text
            finish = _finish_reason(outcome.stopped)
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


def _finish_reason(stopped: str) -> str:
    """``finish_reason`` of a turn that ended with an answer: ``content_filter`` when a hook
    blocked the prompt, ``length`` when a limit stopped it, else ``stop``."""
    if stopped == "prompt_blocked":
        return "content_filter"
    return "length" if stopped else "stop"
