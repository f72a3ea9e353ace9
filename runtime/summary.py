"""Hop 3, the summary: a short record of a turn for the other adapters, kept runtime-side.

``[summary] adapter`` writes it: the adapter that answered (``answering``) or a fixed one.
It reads the turn flattened to text (``input = "text"``) or the turn's own messages, tool
calls and results included, with long contents cut (``input = "trace"``). Thinking is off
unless ``summary.thinking``. Turns of the ``skip`` adapters, a disabled hop and a failed
call keep a plain truncated record instead; a failure never fails the turn.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mol.core import events as ev
from mol.core.errors import EngineError
from mol.runtime.engine import Engine
from mol.runtime.views import TurnRecord

DEFAULT_SUMMARY_PROMPT = (
    "Summarize the turn below for the other specialists of this assistant in at most two "
    "sentences: what the user wanted, what was done and the outcome. Plain text."
)
SUMMARY_INPUT_LIMIT = 4000
"""Characters of the turn the summary hop reads (long texts are cut in the middle)."""
TRACE_STEPS = 12
"""Most tool steps (a call message and its results) a trace keeps: the first four and the
last eight; whole steps are dropped so every call keeps its results."""

Emit = Callable[[ev.Event], Awaitable[None]]


def cut(text: str, limit: int) -> str:
    """``text`` with its middle replaced by ``[...]`` when longer than ``limit``."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]} [...] {text[-half:]}"


def with_identity(messages: list[dict[str, Any]], identity: str) -> list[dict[str, Any]]:
    """``messages`` with ``identity`` appended to the first system message (one is put first
    when there is none). The caller's list is left as it is."""
    if not identity:
        return messages
    out = list(messages)
    if out and out[0].get("role") == "system":
        head = out[0].get("content") or ""
        out[0] = {**out[0], "content": f"{head}\n\n{identity}" if head else identity}
        return out
    return [{"role": "system", "content": identity}, *out]


def trace(view: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last turn of a view as it happened: its user message, the tool calls with their
    results, the answer; at most ``TRACE_STEPS`` steps, each content cut to its share."""
    starts = [i for i, m in enumerate(view) if m.get("role") == "user"]
    turn = view[starts[-1]:] if starts else list(view)
    steps: list[list[dict[str, Any]]] = []
    for message in turn[1:]:
        if message.get("role") == "tool" and steps:
            steps[-1].append(message)
        else:
            steps.append([message])
    if len(steps) > TRACE_STEPS:
        steps = steps[:4] + steps[-(TRACE_STEPS - 4):]
    messages = turn[:1] + [m for step in steps for m in step]
    share = max(200, SUMMARY_INPUT_LIMIT // max(1, len(messages)))
    return [{key: cut(value, share) if key == "content" and isinstance(value, str) else value
             for key, value in message.items() if key != "reasoning_content"}
            for message in messages]


def summary_request(artifact: Any, record: TurnRecord,
                    view: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages of the summary hop for ``record`` (identity included)."""
    prompt = artifact.prompt("summary.prompt") or DEFAULT_SUMMARY_PROMPT
    if artifact.doc.summary.input == "trace":
        messages = [*trace(view), {"role": "user", "content": prompt}]
    else:
        tools = ", ".join(record.tools) or "none"
        body = cut(f"User: {record.user}\n\nAnswered by {record.adapter}: {record.answer}\n\n"
                   f"Tools used: {tools}", SUMMARY_INPUT_LIMIT)
        messages = [{"role": "system", "content": prompt}, {"role": "user", "content": body}]
    return with_identity(messages, artifact.prompt("model.identity"))


async def summarize(engine: Engine, artifact: Any, record: TurnRecord,
                    view: list[dict[str, Any]], emit: Emit) -> None:
    """Write ``record.summary`` (and ``summary_ok``) for the turn just answered."""
    doc = artifact.doc
    config = doc.summary
    plain = cut(f"{record.adapter} handled: {record.user} -> {record.answer}", 400)
    if not config.enabled or record.adapter in config.skip:
        record.summary, record.summary_ok = plain, True
        return
    adapter = doc.summary_adapter(record.adapter)
    extra = {} if config.thinking else dict(doc.engine.thinking_off)
    try:
        completion = await engine.complete(
            adapter, summary_request(artifact, record, view), extra=extra,
            params={"max_tokens": config.max_tokens, "temperature": 0})
        await emit(ev.ModelCalled(adapter, "summary", completion.usage.to_dict(),
                                  round(completion.duration, 6)))
        # A thinking model that spent its budget thinking: its thoughts are the record.
        text = completion.content.strip() or cut(completion.reasoning.strip(), 400)
        if not text:
            raise EngineError("the summary reply was empty")
        record.summary, record.summary_ok = f"[{record.adapter}] {text}", True
    except EngineError as exc:
        await emit(ev.Failed("summary", f"{exc}; stored a plain record instead"))
        record.summary, record.summary_ok = plain, False
    await emit(ev.Summarized(adapter, record.summary_ok, record.summary))
