"""Hop 1, routing: the router adapter reads the router prompt and only the new turn, quoted
as untrusted text (or as written, with ``router.quote_turn`` false: the reference proxy's
request), and answers one label, constrained to the routing labels.

Two request layouts (``router.layout``): ``system`` sends the router prompt as the system
message and the quoted turn as the user message; ``prefill`` sends one user message (the
quoted turn, a blank line, the router prompt without its last line) and that last line
(``model_id=``) as an assistant message the engine continues (``continue_final_message``
with ``add_generation_prompt`` off), the layout the Macaron router was trained on. Thinking
is switched off unless ``router.thinking``; a reasoning model whose label still arrives
in ``reasoning_content`` with an empty reply is understood. A label outside the set, an
empty reply or an engine error selects ``router.fallback``; a turn too long for the
engine's context window fails the turn instead (the answer could not fit either).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from mol.core import events as ev
from mol.core.errors import EngineContextLength, EngineError
from mol.hcp.prompts import prefill_split
from mol.runtime.engine import Completion, Engine
from mol.runtime.views import quote_untrusted

Emit = Callable[[ev.Event], Awaitable[None]]


def route_request(artifact: Any, text: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The routing request for ``text``: its messages and its extra body fields."""
    doc = artifact.doc
    prompt = artifact.prompt("router.prompt")
    turn = quote_untrusted(text) if doc.router.quote_turn else text.strip()
    extra: dict[str, Any] = {}
    if doc.router.layout == "prefill":
        instructions, stem = prefill_split(prompt)
        messages = [{"role": "user", "content": f"{turn}\n\n{instructions}"},
                    {"role": "assistant", "content": stem}]
        extra = {"continue_final_message": True, "add_generation_prompt": False}
    else:
        messages = [{"role": "system", "content": prompt},
                    {"role": "user", "content": turn}]
    if not doc.router.thinking:
        extra.update(doc.engine.thinking_off)
    return messages, extra


def parse_label(reply: Completion, labels: list[str], words_allowed: bool) -> tuple[str, str | None]:
    """``(raw, label)``: what the router answered and the label it names, or None. A label
    with surrounding whitespace only; ``words_allowed`` (an unconstrained engine, the system
    layout) also takes the first label named in a wordier reply."""
    raw = reply.content.strip()
    if not raw and reply.reasoning.strip() in labels:  # thought the label, said nothing
        raw = reply.reasoning.strip()
    if raw in labels:
        return raw, raw
    if words_allowed and raw:
        found = re.search(r"\b(" + "|".join(map(re.escape, labels)) + r")\b", raw)
        return raw, found.group(1) if found else None
    return raw, None


async def route(engine: Engine, artifact: Any, text: str, emit: Emit,
                among: list[str] | None = None) -> ev.RouteDecided:
    """Which adapter answers ``text`` (and whether the fallback was used); ``among``
    restricts the labels (the adapters using a slash command), and when one adapter is
    left it answers without a route request."""
    doc = artifact.doc
    labels, fallback = doc.route_labels, doc.route_fallback
    if among:
        labels = [label for label in labels if label in among] or list(among)
        if len(labels) == 1 and labels != doc.route_labels:
            return await decided(emit, ev.RouteDecided(
                labels[0], "", False, "the only adapter using the command", ev.PINNED))
        fallback = fallback if fallback in labels else labels[0]
    messages, extra = route_request(artifact, text)
    try:
        completion = await engine.complete(
            doc.router.adapter, messages, choices=labels, extra=extra,
            params={"max_tokens": doc.router.max_tokens, "temperature": 0})
    except EngineContextLength:
        raise
    except EngineError as exc:
        await emit(ev.Failed("route", str(exc)))
        return await decided(emit, ev.RouteDecided(fallback, "", True, f"engine error: {exc}",
                                                   ev.FALLBACK))
    await emit(ev.ModelCalled(doc.router.adapter, "route", completion.usage.to_dict(),
                              round(completion.duration, 6)))
    words = doc.engine.routing_constraint == "none" and doc.router.layout == "system"
    raw, label = parse_label(completion, labels, words)
    if label is None:
        reason = "empty reply" if not raw else "label outside the set"
        return await decided(emit, ev.RouteDecided(fallback, raw, True, reason, ev.FALLBACK))
    return await decided(emit, ev.RouteDecided(label, raw, False, "", ev.ROUTED))


async def decided(emit: Emit, decision: ev.RouteDecided) -> ev.RouteDecided:
    """Emit ``decision`` and return it."""
    await emit(decision)
    return decision
