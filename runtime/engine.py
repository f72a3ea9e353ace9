"""The model engine boundary: the only module that imports litellm.

mol reaches the MoL engine (vLLM, SGLang, llama.cpp) through
``litellm.acompletion`` with model id = ``engine.model_prefix`` + adapter name.
litellm's exceptions are translated here into ``EngineError`` subclasses that
keep the cause (``translated``, by exception type; what is not an engine
failure is re-raised untouched); connection errors, 429 and 5xx answers are
retried with exponential backoff, a bounded number of times.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio

from mol.runtime.errors import (
    EngineConnectionError,
    EngineError,
    EngineProtocolError,
    EngineRateLimited,
    EngineResponseError,
    EngineTimeout,
)

ROUTING_CONSTRAINTS = ("structured_outputs", "guided_choice", "regex", "grammar", "none")


@dataclass(frozen=True)
class Usage:
    """Token counts of one engine call, as the engine reported them."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int | None = None
    """Prompt tokens served from the engine's prefix cache, when it says."""

    def to_dict(self) -> dict[str, Any]:
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


@dataclass(frozen=True)
class Delta:
    """A streamed fragment: text, or a piece of tool call ``index``."""

    text: str = ""
    tool_index: int | None = None
    tool_id: str | None = None
    tool_name: str | None = None
    tool_arguments: str = ""


OnDelta = Callable[[Delta], Awaitable[None] | None]


class Engine(Protocol):
    """What the harness needs from a model engine."""

    async def complete(
        self,
        adapter: str,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        params: dict[str, Any] | None = None,
        choices: list[str] | None = None,
        on_delta: OnDelta | None = None,
    ) -> Completion:
        """Ask ``adapter`` for a reply; ``choices`` constrains it to one of those labels."""
        ...


def constraint_body(kind: str, labels: list[str]) -> dict[str, Any]:
    """The request fields that constrain a reply to one of ``labels``, in the engine's dialect."""
    if kind == "structured_outputs":  # vLLM >= 0.10
        return {"structured_outputs": {"choice": list(labels)}}
    if kind == "guided_choice":  # older vLLM
        return {"guided_choice": list(labels)}
    if kind == "regex":  # SGLang
        return {"regex": "(" + "|".join(_regex_escape(label) for label in labels) + ")"}
    if kind == "grammar":  # llama.cpp GBNF
        return {"grammar": "root ::= " + " | ".join(json.dumps(label) for label in labels)}
    if kind == "none":
        return {}
    raise ValueError(f"unknown routing constraint {kind!r}; use one of {ROUTING_CONSTRAINTS}")


def _regex_escape(text: str) -> str:
    return "".join("\\" + c if not c.isalnum() else c for c in text)


def _import_litellm() -> Any:
    # litellm fetches a price list over the network at import unless told not to.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    return litellm


async def preload() -> None:
    """Import litellm in a worker thread (seconds of work). A server does this at startup:
    imported by the first turn, on the event loop, it would stall every connection."""
    import anyio.to_thread

    await anyio.to_thread.run_sync(_import_litellm)


_RETRYABLE = (EngineConnectionError, EngineTimeout, EngineRateLimited)


def _retryable(exc: EngineError) -> bool:
    if isinstance(exc, _RETRYABLE):
        return True
    return isinstance(exc, EngineResponseError) and (exc.status or 0) >= 500


class LiteLLMEngine:
    """An OpenAI-compatible engine reached through litellm."""

    def __init__(
        self,
        api_base: str,
        *,
        model_prefix: str = "hosted_vllm/",
        api_key: str | None = None,
        routing_constraint: str = "structured_outputs",
        timeout: float = 120.0,
        max_retries: int = 2,
        backoff: float = 0.25,
    ) -> None:
        constraint_body(routing_constraint, ["L0"])  # fail early on an unknown kind
        self.api_base = api_base.rstrip("/")
        self.model_prefix = model_prefix
        self.api_key = api_key
        self.routing_constraint = routing_constraint
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self._litellm: Any = None

    @classmethod
    def from_artifact(cls, artifact: Any, engine_url: str | None = None) -> LiteLLMEngine:
        """The engine an HCP artifact names; ``engine_url`` or ``MOL_ENGINE_URL`` override its
        ``api_base``. The key is read from the environment variable the artifact names."""
        config = artifact.doc.engine
        api_key = os.environ.get(config.api_key_env) if config.api_key_env else None
        return cls(
            engine_url or os.environ.get("MOL_ENGINE_URL") or config.api_base,
            model_prefix=config.model_prefix,
            api_key=api_key,
            routing_constraint=config.routing_constraint,
            timeout=config.timeout_sec,
            max_retries=config.max_retries,
        )

    def model_id(self, adapter: str) -> str:
        """litellm model id of an adapter."""
        return self.model_prefix + adapter

    async def complete(
        self,
        adapter: str,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        params: dict[str, Any] | None = None,
        choices: list[str] | None = None,
        on_delta: OnDelta | None = None,
    ) -> Completion:
        """Ask ``adapter`` for a reply, retrying transient failures with backoff."""
        if self._litellm is None:
            self._litellm = _import_litellm()
        kwargs = self._request(adapter, messages, tools, params, choices)
        attempt = 0
        while True:
            try:
                return await self._once(kwargs, on_delta)
            except EngineError as exc:
                if attempt >= self.max_retries or not _retryable(exc):
                    raise
                delay = self.backoff * (2**attempt) * (0.5 + random.random())
                attempt += 1
                await anyio.sleep(min(delay, 8.0))

    def _request(self, adapter: str, messages: list[dict[str, Any]], tools: Any,
                 params: dict[str, Any] | None, choices: list[str] | None) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model_id(adapter),
            "messages": messages,
            "api_base": self.api_base,
            "api_key": self.api_key or "none",
            "timeout": self.timeout,
            "max_retries": 0,  # retries are ours, so they are bounded and counted once
            "num_retries": 0,
        }
        kwargs.update({k: v for k, v in (params or {}).items() if v is not None})
        if tools:
            kwargs["tools"] = tools
        if choices:
            extra = constraint_body(self.routing_constraint, choices)
            if extra:
                kwargs["extra_body"] = extra
        return kwargs

    async def _once(self, kwargs: dict[str, Any], on_delta: OnDelta | None) -> Completion:
        litellm = self._litellm
        model = kwargs["model"]
        started = time.perf_counter()
        if on_delta is None:
            with translated(litellm, model):
                completion = _from_response(await litellm.acompletion(**kwargs))
        else:
            with translated(litellm, model):
                stream = await litellm.acompletion(
                    **kwargs, stream=True, stream_options={"include_usage": True})
            # The caller's on_delta runs outside the translation: its own errors are its own.
            completion = await _collect_stream(_chunks(stream, litellm, model), on_delta)
        return Completion(completion.content, completion.tool_calls, completion.finish_reason,
                          completion.usage, time.perf_counter() - started)


@contextmanager
def translated(litellm: Any, model: str) -> Iterator[None]:
    """Map litellm's exceptions (and the transports' errors it lets through) onto the
    ``EngineError`` tree, keeping the cause; anything else is not the engine's and is
    re-raised as it is."""
    try:
        yield
    except EngineError:
        raise
    except _engine_failures(litellm) as exc:
        raise _translate(exc, litellm, model) from exc


async def _chunks(stream: Any, litellm: Any, model: str) -> AsyncIterator[Any]:
    """The chunks of a litellm stream, each read under ``translated``."""
    iterator = stream.__aiter__()
    while True:
        with translated(litellm, model):
            try:
                chunk = await iterator.__anext__()
            except StopAsyncIteration:
                return
        yield chunk


def _engine_failures(litellm: Any) -> tuple[type[BaseException], ...]:
    """Exception types that mean the engine call failed (not a bug of mol's)."""
    import httpx
    import openai  # litellm's exceptions derive from the openai SDK's, not from one own base

    failures: list[type[BaseException]] = [openai.OpenAIError, litellm.exceptions.OpenAIError,
                                            httpx.HTTPError, TimeoutError, ConnectionError]
    try:
        import aiohttp
    except ImportError:  # litellm's aiohttp transport is optional
        pass
    else:
        failures.append(aiohttp.ClientError)
    return tuple(failures)


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


def _is_connection_failure(exc: BaseException) -> bool:
    """litellm reports a refused connection as a 500 on some transports: look deeper."""
    import httpx

    for inner in _chain(exc):
        if isinstance(inner, ConnectionError | httpx.ConnectError | httpx.RemoteProtocolError):
            return True
        if type(inner).__name__ in ("ClientConnectorError", "ServerDisconnectedError"):
            return True
    return "Cannot connect to host" in str(exc) or "Connection refused" in str(exc)


def _translate(exc: BaseException, litellm: Any, model: str) -> EngineError:
    """One engine failure as the ``EngineError`` it is, by the exception's type."""
    import httpx

    errors = litellm.exceptions
    status = getattr(exc, "status_code", None)
    message = str(getattr(exc, "message", "") or exc).strip() or type(exc).__name__
    message = f"{model}: {message}"
    if isinstance(exc, errors.Timeout | httpx.TimeoutException | TimeoutError):
        return EngineTimeout(message)
    if isinstance(exc, errors.RateLimitError) or status == 429:
        return EngineRateLimited(message)
    if _is_connection_failure(exc):
        return EngineConnectionError(message)
    if isinstance(exc, errors.APIResponseValidationError):
        return EngineProtocolError(f"{message} ({type(exc).__name__})")
    if isinstance(status, int) and not isinstance(exc, errors.APIConnectionError):
        return EngineResponseError(message, status=status)
    return EngineProtocolError(f"{message} ({type(exc).__name__})")


def _usage(raw: Any) -> Usage:
    if raw is None:
        return Usage()
    details = getattr(raw, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    return Usage(getattr(raw, "prompt_tokens", 0) or 0, getattr(raw, "completion_tokens", 0) or 0,
                 cached)


def _from_response(response: Any) -> Completion:
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
                      _usage(getattr(response, "usage", None)))


async def _collect_stream(stream: Any, on_delta: OnDelta) -> Completion:
    text: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    finish = None
    usage = Usage()
    async for chunk in stream:
        if getattr(chunk, "usage", None):
            usage = _usage(chunk.usage)
        for choice in chunk.choices or []:
            finish = choice.finish_reason or finish
            delta = choice.delta
            if delta is None:
                continue
            if delta.content:
                text.append(delta.content)
                await _emit(on_delta, Delta(text=delta.content))
            for fragment in getattr(delta, "tool_calls", None) or []:
                index = fragment.index or 0
                call = calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
                function = fragment.function
                call["id"] = fragment.id or call["id"]
                call["name"] += (function.name or "") if function else ""
                call["arguments"] += (function.arguments or "") if function else ""
                await _emit(on_delta, Delta(
                    tool_index=index, tool_id=fragment.id,
                    tool_name=function.name if function else None,
                    tool_arguments=(function.arguments or "") if function else ""))
    tool_calls = [ToolCall(c["id"], c["name"], c["arguments"]) for _, c in sorted(calls.items())]
    return Completion("".join(text), tool_calls, finish, usage)


async def _emit(on_delta: OnDelta, delta: Delta) -> None:
    result = on_delta(delta)
    if result is not None:
        await result
