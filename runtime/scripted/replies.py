"""Building Chat Completions answers: usage with a simulated prefix cache, bodies and stream chunks."""

from __future__ import annotations

import bisect
import itertools
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mol.runtime.scripted.requests import ChatRequest
from mol.runtime.scripted.script import Rule

_TOKEN = re.compile(r"\w+|[^\w\s]")
_PIECE = re.compile(r"\s*\S+\s*|\s+")


def tokenize(text: str) -> list[str]:
    """A deterministic stand-in for a tokenizer: words and single punctuation marks."""
    return _TOKEN.findall(text)


def prompt_text(body: dict[str, Any]) -> str:
    """What the simulated engine tokenizes: the tools (rendered first, as chat templates do),
    then the messages, JSON-serialized exactly as received."""
    parts = [body["tools"]] if body.get("tools") else []
    return json.dumps([*parts, body["messages"]], ensure_ascii=False, separators=(",", ":"))


class PrefixCache:
    """Per adapter, the longest common token prefix of a prompt with any earlier prompt.

    Prompts are kept sorted: the earlier prompt sharing the longest prefix with
    a new one is always one of its two neighbours in that order.
    """

    def __init__(self) -> None:
        self._seen: dict[str, list[tuple[str, ...]]] = {}

    def add(self, adapter: str, tokens: tuple[str, ...]) -> int:
        """Record ``tokens`` and return how many of them an earlier prompt already had."""
        seen = self._seen.setdefault(adapter, [])
        at = bisect.bisect_left(seen, tokens)
        cached = max((_common(tokens, seen[j]) for j in (at - 1, at) if 0 <= j < len(seen)), default=0)
        if at == len(seen) or seen[at] != tokens:
            seen.insert(at, tokens)
        return cached


def _common(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@dataclass
class Answer:
    """A rule's completion for one request, with its ids and usage."""

    rule: Rule
    model: str
    completion_id: str
    tool_call_ids: list[str]
    usage: dict[str, Any]
    content: str | None = None
    """The reply text (``content``)."""
    reasoning: str | None = None
    """The thinking sent in ``reasoning_field``, if any."""
    reasoning_field: str = "reasoning_content"
    cut: str | None = None
    """``length`` when the request's ``max_tokens`` cut the reply short."""
    stop_reason: str | None = None
    """The request's stop string that ended the reply (vLLM's ``stop_reason``), if any."""

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.rule.tool_calls else self.cut or "stop"

    def message(self) -> dict[str, Any]:
        """The assistant message of a non-streaming response."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.reasoning is not None:
            message[self.reasoning_field] = self.reasoning
        if self.rule.tool_calls:
            message["tool_calls"] = [
                {"id": call_id, "type": "function",
                 "function": {"name": call.name, "arguments": call.arguments}}
                for call_id, call in zip(self.tool_call_ids, self.rule.tool_calls, strict=True)
            ]
        return message

    def completion(self) -> dict[str, Any]:
        """The ``chat.completion`` body."""
        choice = {"index": 0, "message": self.message(), "logprobs": None,
                  "finish_reason": self.finish_reason, "stop_reason": self.stop_reason}
        return {**self._envelope("chat.completion"), "choices": [choice], "usage": self.usage}

    def chunks(self, include_usage: bool) -> Iterator[dict[str, Any]]:
        """The ``chat.completion.chunk`` objects of a streamed response, in order."""
        extra = {"usage": None} if include_usage else {}
        for delta, finish in self._deltas():
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            if finish is not None:
                choice["stop_reason"] = self.stop_reason
            yield {**self._envelope("chat.completion.chunk"), "choices": [choice], **extra}
        if include_usage:
            yield {**self._envelope("chat.completion.chunk"), "choices": [], "usage": self.usage}

    def _deltas(self) -> Iterator[tuple[dict[str, Any], str | None]]:
        yield {"role": "assistant", "content": ""}, None
        for piece in split_pieces(self.reasoning or ""):
            yield {self.reasoning_field: piece}, None
        for piece in split_pieces(self.content or ""):
            yield {"content": piece}, None
        for index, (call_id, call) in enumerate(zip(self.tool_call_ids, self.rule.tool_calls or (),
                                                    strict=True)):
            head = {"index": index, "id": call_id, "type": "function",
                    "function": {"name": call.name, "arguments": ""}}
            yield {"tool_calls": [head]}, None
            for piece in split_pieces(call.arguments):
                yield {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}, None
        yield {}, self.finish_reason

    def _envelope(self, kind: str) -> dict[str, Any]:
        return {"id": self.completion_id, "object": kind, "created": int(time.time()),
                "model": self.model}


def split_pieces(text: str, pieces: int = 3) -> list[str]:
    """``text`` cut at word boundaries into about ``pieces`` deltas (so clients must join them)."""
    words = _PIECE.findall(text)
    if len(words) < pieces:
        size = max(1, -(-len(text) // pieces))
        return [text[i:i + size] for i in range(0, len(text), size)]
    step = -(-len(words) // pieces)
    return ["".join(words[i:i + step]) for i in range(0, len(words), step)]


class AnswerFactory:
    """Numbers completions and tool calls (vLLM style ids) and computes usage.

    ``reasoning_parser`` (``"reasoning_content"`` or ``"reasoning"``, the field it fills)
    makes the engine behave like a reasoning model served with a reasoning parser: unless
    the request turns thinking off, a rule's reply without its own ``reasoning`` is taken
    for thinking and lands in that field, leaving ``content`` empty.
    """

    def __init__(self, reasoning_parser: str | None = None) -> None:
        self._completions = itertools.count(1)
        self._tool_calls = itertools.count(1)
        self.cache = PrefixCache()
        self.reasoning_parser = reasoning_parser

    def answer(self, rule: Rule, request: ChatRequest) -> Answer:
        """The completion ``rule`` gives ``request``, its prompt recorded in the prefix cache."""
        calls = rule.tool_calls or ()
        tokens = tuple(tokenize(prompt_text(request.body)))
        cached = self.cache.add(request.adapter, tokens)
        content, reasoning = rule.reply, rule.reasoning if request.thinking else None
        if self.reasoning_parser and request.thinking and rule.reasoning is None and not calls:
            content, reasoning = None, rule.reply  # the model thought its whole reply
        content, cut, stop = limited(content, request.body)
        produced = ((reasoning or "") + (content or "")
                    or "".join(call.name + call.arguments for call in calls))
        usage = make_usage(len(tokens), max(1, len(tokenize(produced))), cached, rule.usage or {})
        return Answer(rule, request.body["model"], f"chatcmpl-{next(self._completions)}",
                      [f"chatcmpl-tool-{next(self._tool_calls)}" for _ in calls], usage,
                      content, reasoning, self.reasoning_parser or "reasoning_content", cut,
                      stop)

    @staticmethod
    def engine_error(request: ChatRequest, kind: str, limit: int) -> tuple[int, str, str]:
        """``(status, message, type)`` of an engine's own error for ``request``, worded as
        vLLM words it."""
        if kind == "adapter_not_loaded":
            return 404, f"The model `{request.body['model']}` does not exist.", "NotFoundError"
        prompt = len(tokenize(prompt_text(request.body)))
        budget = request.body.get("max_tokens")
        budget = budget if isinstance(budget, int) and not isinstance(budget, bool) else 1
        asked = max(prompt + budget, limit + 1)
        return 400, (f"This model's maximum context length is {limit} tokens. However, you "
                     f"requested {asked} tokens ({asked - budget} in the messages, {budget} in "
                     "the completion). Please reduce the length of the messages or "
                     "completion."), "BadRequestError"


def limited(content: str | None, body: dict[str, Any]
            ) -> tuple[str | None, str | None, str | None]:
    """A reply as an engine gives it under the request's ``stop`` strings (cut before the
    first one found, which is named) and ``max_tokens`` (cut after that many stand-in tokens:
    ``length``): ``(content, cut, stop string)``."""
    if not content:
        return content, None, None
    stops = body.get("stop")
    stops = [stops] if isinstance(stops, str) else stops if isinstance(stops, list) else []
    found = [(content.find(s), s) for s in stops if isinstance(s, str) and s and s in content]
    stop = None
    if found:
        at, stop = min(found)
        content = content[:at]
    budget = body.get("max_tokens", body.get("max_completion_tokens"))
    if isinstance(budget, int) and not isinstance(budget, bool) and budget > 0:
        ends = [match.end() for match in _TOKEN.finditer(content)]
        if len(ends) > budget:
            return content[:ends[budget - 1]], "length", None
    return content, None, stop


def make_usage(prompt: int, completion: int, cached: int, override: dict[str, int]) -> dict[str, Any]:
    """The ``usage`` object, with a rule's overrides applied (total follows unless given)."""
    prompt = override.get("prompt_tokens", prompt)
    completion = override.get("completion_tokens", completion)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": override.get("total_tokens", prompt + completion),
        "prompt_tokens_details": {"cached_tokens": override.get("cached_tokens", cached)},
    }
