"""``chat`` spans: an ``Engine`` wrapper that opens one around each request.

The request's hop (route, answer step, summary, compaction) is not the engine's to know:
the span is parked on the span current at the call and learns its hop from the
``model_call`` event the caller emits next (``OtelSpan.park``), the same way an eval
recording learns it. A request made where nothing is traced (an MCP server's sampling,
answered in the MCP client's own task) passes through untouched.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from mol.core import tracing
from mol.runtime.engine import Completion, OnDelta
from mol.runtime.tracing import otel as sc  # the conventions' names


def engine_facts(artifact: Any, engine: Any = None) -> dict[str, Any]:
    """What every ``chat`` span says of the engine: the provider litellm speaks to (the
    model prefix: ``hosted_vllm/`` is vLLM) and the address it is reached at (``engine``'s,
    or that of the engine it wraps, else the artifact's ``api_base``)."""
    config = artifact.doc.engine
    provider = config.model_prefix.strip("/").removeprefix("hosted_") or "openai"
    facts: dict[str, Any] = {sc.PROVIDER_NAME: provider}
    while engine is not None and not isinstance(getattr(engine, "api_base", None), str):
        engine = getattr(engine, "inner", None)
    parts = urlsplit(engine.api_base if engine is not None else config.api_base)
    if parts.hostname:
        facts[sc.SERVER_ADDRESS] = parts.hostname
        facts[sc.SERVER_PORT] = parts.port or (443 if parts.scheme == "https" else 80)
    return facts


class TracedEngine:
    """An ``Engine`` whose requests are ``chat`` spans under the current span."""

    def __init__(self, inner: Any, artifact: Any) -> None:
        self.inner = inner
        self.artifact = artifact
        self.facts = engine_facts(artifact, inner)
        """What each of its spans says of the engine."""

    def __getattr__(self, name: str) -> Any:
        # The rest of the inner engine's surface (its model list, its url) stays as it is.
        return getattr(self.inner, name)

    async def complete(self, adapter: str, messages: list[dict[str, Any]], *,
                       tools: list[dict[str, Any]] | None = None,
                       params: dict[str, Any] | None = None,
                       choices: list[str] | None = None,
                       on_delta: OnDelta | None = None,
                       extra: dict[str, Any] | None = None) -> Completion:
        """The inner engine's reply, with a ``chat`` span around the request."""
        parent = tracing.current()
        if parent is None:
            return await self.inner.complete(adapter, messages, tools=tools, params=params,
                                             choices=choices, on_delta=on_delta, extra=extra)
        chat = parent.child("chat", {
            "adapter": adapter, "engine_name": self.artifact.doc.engine_name(adapter),
            "engine": self.facts, "messages": messages, "tools": tools,
            "params": params, "choices": choices, "stream": on_delta is not None})
        try:
            completion = await self.inner.complete(adapter, messages, tools=tools,
                                                   params=params, choices=choices,
                                                   on_delta=on_delta, extra=extra)
        except BaseException as exc:
            parent.park(chat, exc)
            raise
        chat.note(completion=completion)
        parent.park(chat)
        return completion
