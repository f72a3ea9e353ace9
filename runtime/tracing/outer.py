"""The spans of what drives the runtime: an HTTP request to ``mol serve`` (the span a
client's ``traceparent`` continues and the ``traceresponse`` names), and a ``mol eval run``
with its episodes (each episode's turn is a child of its episode)."""

from __future__ import annotations

from typing import Any

from mol.core import events as ev
from mol.runtime.tracing import otel as sc  # the conventions' names
from mol.runtime.tracing.spans import SHAPES, Shape, Sink


class Request(Shape):
    """An HTTP request to ``mol serve`` (a server span, as the HTTP conventions name it)."""

    span_kind = "server"

    def name(self, facts: dict[str, Any]) -> str:
        return f"{facts['method']} {facts['path']}"

    def opened(self, span: Sink, facts: dict[str, Any]) -> None:
        span.set(sc.HTTP_METHOD, facts["method"])
        span.set(sc.URL_PATH, facts["path"])
        span.set(sc.HTTP_ROUTE, facts["path"])

    def note(self, span: Sink, facts: dict[str, Any]) -> None:
        status = facts.get("status")
        if status is not None:
            span.set(sc.HTTP_STATUS, status)
            if status >= 500:  # a client's mistake is not the server's error
                span.fail(str(status))


class Run(Shape):
    """``mol eval run``: every episode of the run is its child."""

    def name(self, facts: dict[str, Any]) -> str:
        return f"mol.eval.run {facts['suite']}"

    def opened(self, span: Sink, facts: dict[str, Any]) -> None:
        span.set("mol.eval.suite", facts["suite"])
        span.set("mol.eval.run", facts["run"])
        span.set("mol.eval.agent", facts["agent"])
        span.set("mol.eval.adapter", facts.get("adapter") or "")
        span.set("mol.eval.episodes", facts["episodes"])
        span.set("mol.hcp.digest", facts["artifact"].digest)
        span.set(sc.AGENT_NAME, facts["artifact"].name)


class Episode(Shape):
    """One episode: its sandbox, the agent's turn, the verifier."""

    def name(self, facts: dict[str, Any]) -> str:
        return f"mol.eval.episode {facts['task']}"

    def opened(self, span: Sink, facts: dict[str, Any]) -> None:
        span.set("mol.eval.task", facts["task"])
        span.set("mol.eval.epoch", facts["epoch"])
        span.set("mol.eval.agent", facts["agent"])

    def note(self, span: Sink, facts: dict[str, Any]) -> None:
        episode = facts.get("episode")
        if episode is None:
            return
        span.set("mol.eval.outcome", episode.outcome)
        if episode.reward is not None:
            span.set("mol.eval.reward", float(episode.reward))
        if episode.reason:
            span.set("mol.eval.reason", episode.reason)
        span.set("mol.eval.steps", episode.steps)
        span.set(sc.INPUT_TOKENS, episode.prompt_tokens)
        span.set(sc.OUTPUT_TOKENS, episode.completion_tokens)
        span.set(sc.CACHE_READ_TOKENS, episode.cached_tokens)
        span.set("mol.eval.placement", episode.placement)
        if episode.outcome == "error":
            span.fail(episode.reason or "error")

    def event(self, span: Sink, event: ev.Event) -> None:
        pass


OUTER: dict[str, Shape] = {"request": Request(), "eval.run": Run(), "eval.episode": Episode()}
ALL_SHAPES: dict[str, Shape] = {**SHAPES, **OUTER}
"""Every kind of span mol makes, by the name its scope points use."""
