"""What the engine answers, in mol's terms: ``Completion`` (text, reasoning, tool calls,
usage) and the streamed ``Delta``; and reading litellm's response objects and streams into
them (attribute access only: the litellm import and its errors stay in ``engine``).

Reasoning models served with a reasoning parser (vLLM, SGLang) put their thinking in
``reasoning_content`` (litellm also maps vLLM's newer ``reasoning`` field there).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from mol.core.errors import EngineProtocolError


@dataclass(frozen=True)
class Usage:
    """Token counts of one engine call, as the engine reported them."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int | None = None
    """Prompt tokens served from the engine's prefix cache, when it says."""

    def to_dict(self) -> dict[str, Any]:
        """The counts as the ``ModelCalled`` event carries them."""
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "cached_tokens": self.cached_tokens}


@dataclass(frozen=True)
class ToolCall:
    """A tool call as the model issued it (``arguments`` is the raw JSON text)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Completion:
    """One finished model reply."""

    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    duration: float = 0.0
    """Seconds from request to the last byte."""
    reasoning: str = ""
    """The engine's reasoning (``reasoning_content``), when it reports one."""
    stop_sequence: str | None = None
    """The client's stop sequence that ended the reply, when the engine says which (vLLM's
    ``stop_reason``, SGLang's ``matched_stop``; a stop token's id does not count)."""


@dataclass(frozen=True)
class Delta:
    """A streamed fragment: text, reasoning, or a piece of tool call ``index``."""

    text: str = ""
    tool_index: int | None = None
    tool_id: str | None = None
    tool_name: str | None = None
    tool_arguments: str = ""
    reasoning: str = ""


OnDelta = Callable[[Delta], Awaitable[None] | None]


def _reasoning(message: Any) -> str:
    value = getattr(message, "reasoning_content", None) or getattr(message, "reasoning", None)
    return value if isinstance(value, str) else ""


def _stop_sequence(choice: Any) -> str | None:
    """The stop string a choice says ended it (litellm keeps vLLM's and SGLang's fields as
    attributes, or among ``provider_specific_fields``)."""
    extra = getattr(choice, "provider_specific_fields", None) or {}
    for name in ("stop_reason", "matched_stop"):
        value = getattr(choice, name, None) or (extra.get(name) if isinstance(extra, dict)
                                                 else None)
        if isinstance(value, str) and value:
            return value
    return None


def read_usage(raw: Any) -> Usage:
    """A litellm ``usage`` object as ``Usage`` (cached tokens when the engine reports them)."""
    if raw is None:
        return Usage()
    details = getattr(raw, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    return Usage(getattr(raw, "prompt_tokens", 0) or 0, getattr(raw, "completion_tokens", 0) or 0,
                 cached)


def read_response(response: Any) -> Completion:
    """A non-streamed litellm response as a ``Completion``."""
    try:
        choice = response.choices[0]
        message = choice.message
    except (AttributeError, IndexError, TypeError) as exc:
        raise EngineProtocolError(f"reply without choices: {str(response)[:200]}") from exc
    calls = [
        ToolCall(call.id or "", call.function.name or "", call.function.arguments or "")
        for call in (getattr(message, "tool_calls", None) or [])
    ]
    return Completion(message.content or "", calls, choice.finish_reason,
                      read_usage(getattr(response, "usage", None)),
                      reasoning=_reasoning(message), stop_sequence=_stop_sequence(choice))


async def read_stream(stream: AsyncIterable[Any], on_delta: OnDelta) -> Completion:
    """A litellm stream as a ``Completion``, passing each fragment to ``on_delta``."""
    text: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    finish = None
    stop = None
    usage = Usage()
    async for chunk in stream:
        if getattr(chunk, "usage", None):
            usage = read_usage(chunk.usage)
        for choice in chunk.choices or []:
            finish = choice.finish_reason or finish
            stop = _stop_sequence(choice) or stop
            delta = choice.delta
            if delta is None:
                continue
            if thought := _reasoning(delta):
                reasoning.append(thought)
                await _emit(on_delta, Delta(reasoning=thought))
            if delta.content:
                text.append(delta.content)
                await _emit(on_delta, Delta(text=delta.content))
            for fragment in getattr(delta, "tool_calls", None) or []:
                await _emit(on_delta, _tool_fragment(calls, fragment))
    tool_calls = [ToolCall(c["id"], c["name"], c["arguments"]) for _, c in sorted(calls.items())]
    return Completion("".join(text), tool_calls, finish, usage, reasoning="".join(reasoning),
                      stop_sequence=stop)


def _tool_fragment(calls: dict[int, dict[str, str]], fragment: Any) -> Delta:
    """Add one streamed tool-call fragment to ``calls``; the ``Delta`` announcing it."""
    index = fragment.index or 0
    call = calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
    function = fragment.function
    call["id"] = fragment.id or call["id"]
    call["name"] += (function.name or "") if function else ""
    call["arguments"] += (function.arguments or "") if function else ""
    return Delta(tool_index=index, tool_id=fragment.id,
                 tool_name=function.name if function else None,
                 tool_arguments=(function.arguments or "") if function else "")


async def _emit(on_delta: OnDelta, delta: Delta) -> None:
    result = on_delta(delta)
    if result is not None:
        await result
