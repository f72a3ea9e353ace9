"""Calling the engine: requests through ``litellm.acompletion``, retries, and what their
failures mean.

The model id is ``engine.model_prefix`` + the adapter's engine name
(``adapters.NAME.engine_name``, default NAME). litellm's exceptions are translated here
into ``EngineError`` subclasses that keep the cause (``translated``, by exception type: a
context-window error becomes ``EngineContextLength``, a missing model or unloaded LoRA
``EngineAdapterUnavailable``; what is not an engine failure is re-raised untouched);
connection errors, 429 and 5xx answers are retried with exponential backoff, a bounded
number of times. litellm itself is imported by ``loading``; the replies are read by
``completions``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol

import anyio

from mol.core.errors import (
    EngineAdapterUnavailable,
    EngineConnectionError,
    EngineContextLength,
    EngineError,
    EngineProtocolError,
    EngineRateLimited,
    EngineResponseError,
    EngineTimeout,
)
from mol.runtime.engine import affinity
from mol.runtime.engine.adapters_check import list_models
from mol.runtime.engine.completions import (
    Completion,
    OnDelta,
    read_response,
    read_stream,
)
from mol.runtime.engine.http import http_client
from mol.runtime.engine.loading import import_litellm, register_unpriced

ROUTING_CONSTRAINTS = ("structured_outputs", "guided_choice", "regex", "grammar", "none")


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
        extra: dict[str, Any] | None = None,
    ) -> Completion:
        """Ask ``adapter`` for a reply; ``choices`` constrains it to one of those labels;
        ``extra`` are further request body fields (``continue_final_message``,
        ``chat_template_kwargs``, ...), sent as they are."""
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


_RETRYABLE = (EngineConnectionError, EngineTimeout, EngineRateLimited)


def _retryable(exc: EngineError) -> bool:
    if isinstance(exc, _RETRYABLE):
        return True
    return isinstance(exc, EngineResponseError) and (exc.status or 0) >= 500


class LiteLLMEngine:
    """An OpenAI-compatible engine reached through litellm."""

    speculates = True
    """Requests may be started ahead and abandoned (``mol.runtime.speculation``): a cancelled
    one closes its connection, so the engine aborts it, and leaves no trace here."""

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
        names: Mapping[str, str] | None = None,
        affinity_header: str | None = None,
        thinking_on: Mapping[str, Any] | None = None,
        thinking_off: Mapping[str, Any] | None = None,
    ) -> None:
        constraint_body(routing_constraint, ["L0"])  # fail early on an unknown kind
        self.api_base = api_base.rstrip("/")
        self.model_prefix = model_prefix
        self.names = dict(names or {})
        """Adapter -> the engine's name of its LoRA, where they differ."""
        self.api_key = api_key
        self.affinity_header = affinity_header
        """Header carrying the conversation's id on every request (``mol.runtime.engine.affinity``)."""
        self.thinking = (dict(thinking_on or {}), dict(thinking_off or {}))
        """The body fields of a ``thinking`` parameter: switched on, switched off."""
        self.routing_constraint = routing_constraint
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self._litellm: Any = None
        self._priced: set[str] = set()
        """Model ids registered with litellm (at zero price when it has none)."""

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
            names={name: artifact.doc.engine_name(name) for name in artifact.doc.adapters},
            affinity_header=config.affinity_header,
            thinking_on=config.thinking_on, thinking_off=config.thinking_off,
        )

    def load(self) -> None:
        """Import litellm now (it takes seconds) rather than at the first request; blocking,
        so callers with an event loop run it in a worker thread."""
        if self._litellm is None:
            self._litellm = import_litellm()
            self._price([self.model_id(adapter) for adapter in self.names])

    def _price(self, model_ids: list[str]) -> None:
        register_unpriced(self._litellm, [m for m in model_ids if m not in self._priced])
        self._priced.update(model_ids)

    def model_id(self, adapter: str) -> str:
        """litellm model id of an adapter: the prefix and the engine's name of its LoRA."""
        return self.model_prefix + self.names.get(adapter, adapter)

    async def models(self) -> list[dict[str, Any]] | None:
        """What ``GET /v1/models`` lists (``data``), or None when the engine does not answer
        it readably; eval keys results by a digest of it (``mol.eval.keys``)."""
        try:
            return await list_models(self.api_base, self.api_key, min(self.timeout, 30.0))
        except (EngineConnectionError, EngineResponseError, EngineProtocolError):
            return None

    async def count_tokens(self, adapter: str, messages: list[dict[str, Any]],
                           tools: list[dict[str, Any]] | None = None) -> int | None:
        """The prompt tokens ``messages`` (and ``tools``) make for ``adapter``, as the
        engine's tokenizer counts them (vLLM's ``POST /tokenize``, at the server's root);
        None when the engine does not say."""
        import httpx

        root = self.api_base.removesuffix("/v1")
        body: dict[str, Any] = {"model": self.names.get(adapter, adapter),
                                "messages": messages, "add_generation_prompt": True}
        if tools:
            body["tools"] = tools
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            async with http_client(root, min(self.timeout, 10.0)) as client:
                response = await client.post(f"{root}/tokenize", json=body, headers=headers)
            response.raise_for_status()
            count = response.json().get("count")
        except (httpx.HTTPError, ValueError, AttributeError):
            return None
        return count if isinstance(count, int) and not isinstance(count, bool) else None

    async def complete(
        self,
        adapter: str,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        params: dict[str, Any] | None = None,
        choices: list[str] | None = None,
        on_delta: OnDelta | None = None,
        extra: dict[str, Any] | None = None,
    ) -> Completion:
        """Ask ``adapter`` for a reply, retrying transient failures with backoff."""
        if self._litellm is None:  # seconds of import (or of waiting for start_import's)
            await anyio.to_thread.run_sync(self.load)
        kwargs = self._request(adapter, messages, tools, params, choices, extra)
        if kwargs["model"] not in self._priced:  # an adapter not named at construction
            self._price([kwargs["model"]])
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

    def wire_body(self, adapter: str, messages: list[dict[str, Any]], *,
                  tools: list[dict[str, Any]] | None = None,
                  params: dict[str, Any] | None = None, choices: list[str] | None = None,
                  extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """The JSON body ``complete`` sends for this request, built by litellm's own
        transformation for the engine's provider and nothing sent (litellm drops
        ``content: null`` from tool-call messages and ``additionalProperties`` from tool
        schemas on the way, so the body is not the request as mol made it). Blocking: it
        imports litellm when not loaded yet."""
        self.load()
        kwargs = self._request(adapter, messages, tools, params, choices, extra)
        del kwargs["api_key"]  # return_raw_request passes its own placeholder key
        litellm = self._litellm
        raw = litellm.utils.return_raw_request(litellm.types.utils.CallTypes.completion, kwargs)
        body = raw.get("raw_request_body")
        if not isinstance(body, dict):
            raise EngineError(f"{kwargs['model']}: litellm did not build the request body: "
                              f"{raw.get('error') or 'no body'}")
        return body

    def _request(self, adapter: str, messages: list[dict[str, Any]], tools: Any,
                 params: dict[str, Any] | None, choices: list[str] | None,
                 extra: dict[str, Any] | None) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model_id(adapter),
            "messages": messages,
            "api_base": self.api_base,
            "api_key": self.api_key or "none",
            "timeout": self.timeout,
            "max_retries": 0,  # retries are ours, so they are bounded and counted once
            "num_retries": 0,
        }
        params = dict(params or {})
        switch = params.pop(affinity.THINKING, None)
        kwargs.update({k: v for k, v in params.items() if v is not None})
        if tools:
            kwargs["tools"] = tools
        conversation = affinity.current()
        if self.affinity_header and conversation:
            kwargs["extra_headers"] = {self.affinity_header: conversation}
        # litellm sends extra_body keys as top-level body keys, untouched, to any provider.
        body = {**affinity.thinking_fields(switch, *self.thinking), **(extra or {})}
        if choices:
            body.update(constraint_body(self.routing_constraint, choices))
        if body:
            kwargs["extra_body"] = body
        return kwargs

    async def _once(self, kwargs: dict[str, Any], on_delta: OnDelta | None) -> Completion:
        litellm = self._litellm
        model = kwargs["model"]
        started = time.perf_counter()
        if on_delta is None:
            with translated(litellm, model):
                completion = read_response(await litellm.acompletion(**kwargs))
        else:
            with translated(litellm, model):
                stream = await litellm.acompletion(
                    **kwargs, stream=True, stream_options={"include_usage": True})
            # The caller's on_delta runs outside the translation: its own errors are its own.
            completion = await read_stream(_chunks(stream, litellm, model), on_delta)
        return dataclasses.replace(completion, duration=time.perf_counter() - started)


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


_UNLOADED = ("is not loaded", "not in configured lora_pool", "not found in lora",
             "lora adapter not found")
"""How SGLang and vLLM word a 400 for a LoRA that is not loaded (vLLM answers a model it
does not serve with 404, which litellm raises as ``NotFoundError``)."""


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
    if isinstance(exc, errors.ContextWindowExceededError):
        return EngineContextLength(message, status=status)
    if isinstance(exc, errors.NotFoundError) or (
            status == 400 and any(sign in message.lower() for sign in _UNLOADED)):
        return EngineAdapterUnavailable(message, status=status)
    if _is_connection_failure(exc):
        return EngineConnectionError(message)
    if isinstance(exc, errors.APIResponseValidationError):
        return EngineProtocolError(f"{message} ({type(exc).__name__})")
    if isinstance(status, int) and not isinstance(exc, errors.APIConnectionError):
        return EngineResponseError(message, status=status)
    return EngineProtocolError(f"{message} ({type(exc).__name__})")
