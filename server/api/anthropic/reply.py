"""A turn's events as an Anthropic ``message`` object, or its stream of events.

The message's ``content`` holds a ``thinking`` block (the engine's reasoning, signed:
``mol.server.api.anthropic.thinking``), a ``text`` block and the ``tool_use`` blocks of
the calls the client runs (their ids are mol's call ids, which name the adapter the
results go back to). ``stop_reason``: ``tool_use``; ``max_tokens`` when the engine's token
limit or the adapter's step or token budget cut the answer; ``stop_sequence`` (with
``stop_sequence``) when the engine says one of the client's ended it; ``refusal`` when a
hook blocked the prompt; else ``end_turn``. ``usage`` splits the prompt tokens into those
the engine served from its prefix cache (``cache_read_input_tokens``) and the rest
(``input_tokens``). Which adapter answered, and the tools left out, are in ``metadata``.

Streaming sends ``message_start``, a ``ping``, then one block at a time
(``content_block_start``, its deltas: ``thinking_delta`` then ``signature_delta``,
``text_delta``, ``input_json_delta``; ``content_block_stop``) as the turn produces them, then
``message_delta`` (stop reason, usage) and ``message_stop``; a ``ping`` while nothing
happens for a while; an ``error`` event for a failure after the stream started.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from mol.core import events as ev
from mol.server.api.anthropic.requests import Conversation, Tools
from mol.server.api.anthropic.thinking import Signer
from mol.server.api.replies import Item, Outcome, TranscriptReply
from mol.server.http.errors import ApiError
from mol.server.http.sse import sse
from mol.server.turns.jobs import Job, KeepAlive


class MessageReply(TranscriptReply):
    """Renders one job's turn in the Anthropic Messages API's shape."""

    id_prefix = "msg_"
    noun = "message"
    kind = "messages"

    def __init__(self, model: str, conversation: Conversation, job: Job, signer: Signer,
                 tools: Tools, show_thinking: bool = True) -> None:
        super().__init__(model, conversation.messages, job)
        self.signer, self.tools, self.show_thinking = signer, tools, show_thinking

    def thinking(self, text: str) -> dict[str, Any]:
        """A signed ``thinking`` block (without its text when the client asked for none)."""
        shown = text if self.show_thinking else ""
        return {"type": "thinking", "thinking": shown, "signature": self.signer.sign(shown)}

    def usage_object(self) -> dict[str, int]:
        """``usage``: the turn's prompt tokens minus those its engine had cached, those,
        and the completion tokens."""
        used = self.usage
        return {"input_tokens": max(0, used.prompt_tokens - used.cached_tokens),
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": used.cached_tokens,
                "output_tokens": used.completion_tokens}

    def message(self, content: list[dict[str, Any]], outcome: Outcome | None
                ) -> dict[str, Any]:
        """The ``message`` object (``outcome`` None: as it starts)."""
        reason, sequence = stop_reason(outcome) if outcome is not None else (None, None)
        metadata = dict(self.metadata())
        if self.tools.left_out:
            metadata["mol_tools_left_out"] = ", ".join(self.tools.left_out)
        usage = self.usage_object() if outcome is not None else {
            "input_tokens": 0, "output_tokens": 0}
        return {"id": self.id, "type": "message", "role": "assistant", "model": self.model,
                "content": content, "stop_reason": reason, "stop_sequence": sequence,
                "usage": usage, "metadata": metadata}

    def headers(self) -> dict[str, str]:
        """``x-mol-adapter``, ``x-mol-route`` and ``x-mol-tools-left-out``."""
        headers = super().headers()
        if self.tools.left_out:
            headers["x-mol-tools-left-out"] = ", ".join(self.tools.left_out)
        return headers

    async def complete(self, outcome: Outcome) -> dict[str, Any]:
        """The non-streaming ``message``."""
        if isinstance(outcome, ApiError):
            raise outcome
        assert isinstance(outcome, ev.Answered | ev.ClientToolsRequested)
        content = [self.thinking(outcome.reasoning)] if outcome.reasoning else []
        if isinstance(outcome, ev.ClientToolsRequested):
            uses = [tool_use(call) for call in outcome.calls]
            await self.finish(transcript_message("", uses))
            return self.message([*content, *uses], outcome)
        if outcome.text:
            content.append({"type": "text", "text": outcome.text})
        await self.finish(transcript_message(outcome.text, []))
        return self.message(content, outcome)

    def event(self, data: dict[str, Any]) -> bytes:
        """One server-sent event, named by its ``type``."""
        return sse(data, event=data["type"])

    async def pieces(self, first: Item, rest: AsyncIterator[Item]) -> AsyncIterator[bytes]:
        """The streamed message, from ``message_start`` to ``message_stop``."""
        yield self.event({"type": "message_start", "message": self.message([], None)})
        yield self.event({"type": "ping"})
        blocks = _Blocks(self)
        item: Item | None = first
        while item is not None:
            if isinstance(item, KeepAlive):
                yield self.event({"type": "ping"})
            elif isinstance(item, ApiError):
                yield self.event(item.anthropic()[1])
                return
            elif isinstance(item, ev.ReasoningDelta):
                for piece in blocks.thinking(item.text):
                    yield piece
            elif isinstance(item, ev.TextDelta):
                for piece in blocks.text(item.text):
                    yield piece
            elif isinstance(item, ev.ToolCallDelta):
                for piece in blocks.tool(item):
                    yield piece
            else:
                for piece in blocks.close_with(item):
                    yield piece
                await self.finish(transcript_message("".join(blocks.sent), [
                    tool_use(call) for call in getattr(item, "calls", [])]))
                reason, sequence = stop_reason(item)
                yield self.event({"type": "message_delta", "usage": self.usage_object(),
                                  "delta": {"stop_reason": reason, "stop_sequence": sequence}})
                yield self.event({"type": "message_stop"})
                return
            item = await anext(rest, None)


class _Blocks:
    """The content blocks of one streamed message as they open, grow and close."""

    def __init__(self, reply: MessageReply) -> None:
        self.reply = reply
        self.index = -1
        self.open: str | int | None = None
        """The open block: ``thinking``, ``text``, a client call's index, or None."""
        self.thought: list[str] = []
        self.sent: list[str] = []
        """The text streamed so far (what the client holds)."""
        self.calls: set[int] = set()
        """The client calls already streamed, by index."""

    def _start(self, kind: str | int, block: dict[str, Any]) -> list[bytes]:
        pieces = self.close()
        self.index += 1
        self.open = kind
        return [*pieces, self.reply.event({"type": "content_block_start",
                                           "index": self.index, "content_block": block})]

    def _delta(self, delta: dict[str, Any]) -> bytes:
        return self.reply.event({"type": "content_block_delta", "index": self.index,
                                 "delta": delta})

    def close(self) -> list[bytes]:
        """Close the open block (a thinking block with its signature)."""
        if self.open is None:
            return []
        pieces = []
        if self.open == "thinking":
            signature = self.reply.thinking("".join(self.thought))["signature"]
            pieces.append(self._delta({"type": "signature_delta", "signature": signature}))
            self.thought = []
        self.open = None
        return [*pieces, self.reply.event({"type": "content_block_stop", "index": self.index})]

    def thinking(self, text: str) -> list[bytes]:
        pieces = [] if self.open == "thinking" else self._start(
            "thinking", {"type": "thinking", "thinking": "", "signature": ""})
        self.thought.append(text)
        if self.reply.show_thinking:
            pieces.append(self._delta({"type": "thinking_delta", "thinking": text}))
        return pieces

    def text(self, text: str) -> list[bytes]:
        pieces = [] if self.open == "text" else self._start("text", {"type": "text",
                                                                      "text": ""})
        self.sent.append(text)
        return [*pieces, self._delta({"type": "text_delta", "text": text})]

    def tool(self, delta: ev.ToolCallDelta) -> list[bytes]:
        pieces = []
        if delta.call_id is not None:
            self.calls.add(delta.index)
            pieces = self._start(delta.index, {"type": "tool_use", "id": delta.call_id,
                                               "name": delta.name or "", "input": {}})
        if delta.arguments and self.open == delta.index:
            pieces.append(self._delta({"type": "input_json_delta",
                                       "partial_json": delta.arguments}))
        return pieces

    def close_with(self, outcome: ev.Answered | ev.ClientToolsRequested) -> list[bytes]:
        """The blocks the outcome adds (an answer not streamed, calls not streamed), then
        the last one closed."""
        pieces: list[bytes] = []
        if isinstance(outcome, ev.Answered) and not self.sent and outcome.text:
            pieces += self.text(outcome.text)  # not streamed (generated UI, a notice)
        for index, call in enumerate(getattr(outcome, "calls", [])):
            if index not in self.calls:
                use = tool_use(call)
                pieces += self._start(index, {**use, "input": {}})
                pieces.append(self._delta({"type": "input_json_delta",
                                           "partial_json": json.dumps(use["input"])}))
        return [*pieces, *self.close()]


def tool_use(call: dict[str, Any]) -> dict[str, Any]:
    """A client call as a ``tool_use`` block (arguments that are no JSON object: ``{}``)."""
    try:
        arguments = json.loads(call["function"]["arguments"] or "{}")
    except (ValueError, RecursionError):
        arguments = {}
    return {"type": "tool_use", "id": call["id"], "name": call["function"]["name"],
            "input": arguments if isinstance(arguments, dict) else {}}


def transcript_message(text: str, uses: list[dict[str, Any]]) -> dict[str, Any]:
    """The reply as the client will send it back, chat-shaped (what its fingerprint reads)."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if uses:
        message["tool_calls"] = [
            {"id": use["id"], "type": "function",
             "function": {"name": use["name"], "arguments": json.dumps(use["input"])}}
            for use in uses]
    return message


def stop_reason(outcome: Outcome) -> tuple[str, str | None]:
    """``stop_reason`` and ``stop_sequence`` of a turn's outcome."""
    if isinstance(outcome, ev.ClientToolsRequested):
        return "tool_use", None
    assert isinstance(outcome, ev.Answered)
    if outcome.stopped == "prompt_blocked":
        return "refusal", None
    if outcome.stopped or outcome.finish_reason == "length":
        return "max_tokens", None
    if outcome.stop_sequence:
        return "stop_sequence", outcome.stop_sequence
    return "end_turn", None
