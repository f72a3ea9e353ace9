"""Hop 3, the summary: a short record of a turn for the other adapters, kept runtime-side.

``[summary] adapter`` writes it: the adapter that answered (``answering``) or a fixed one.
It reads the turn flattened to text (``input = "text"``) or the turn's own messages, tool
calls and results included, with long contents cut (``input = "trace"``). Thinking is off
unless ``summary.thinking``. Turns of the ``skip`` adapters, a disabled hop and a failed
call keep a plain truncated record instead; a failure never fails the turn. A deferred
segment (``mol.runtime.deferred``: several consecutive turns of one adapter) is summarized
the same way, in one request.
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
DEFAULT_SEGMENT_PROMPT = (
    "Summarize the turns below for the other specialists of this assistant in at most three "
    "sentences: what the user wanted, what was done and the outcome. Plain text."
)
"""The built-in prompt for a deferred segment of several turns (``[summary] when``)."""
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


def trace(view: list[dict[str, Any]], start: int | None = None) -> list[dict[str, Any]]:
    """The last turn of a view as it happened (or the turns from index ``start`` on): its
    user message, the tool calls with their results, the answer; at most ``TRACE_STEPS``
    steps, each content cut to its share."""
    starts = [i for i, m in enumerate(view) if m.get("role") == "user"]
    if start is None:
        start = starts[-1] if starts else 0
    turn = view[start:]
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
    return segment_request(artifact, [record], view)


def segment_request(artifact: Any, records: list[TurnRecord],
                    view: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages of the summary hop for ``records``, consecutive turns of one adapter
    whose view is ``view`` (one turn: the request ``summary_request`` makes)."""
    prompt = artifact.prompt("summary.prompt").strip() or (
        DEFAULT_SUMMARY_PROMPT if len(records) == 1 else DEFAULT_SEGMENT_PROMPT)
    if artifact.doc.summary.input == "trace":
        start = None if len(records) == 1 else segment_start(view, records)
        messages = [*trace(view, start), {"role": "user", "content": prompt}]
    else:
        share = max(200, SUMMARY_INPUT_LIMIT // len(records))
        body = "\n\n---\n\n".join(cut(_flat(record), share) for record in records)
        messages = [{"role": "system", "content": prompt}, {"role": "user", "content": body}]
    return with_identity(messages, artifact.prompt("model.identity").strip())


def _flat(record: TurnRecord) -> str:
    tools = ", ".join(record.tools) or "none"
    return (f"User: {record.user}\n\nAnswered by {record.adapter}: {record.answer}\n\n"
            f"Tools used: {tools}")


def segment_start(view: list[dict[str, Any]], records: list[TurnRecord]) -> int | None:
    """Where the first of ``records`` starts in ``view``: its user message, found walking
    back past the user messages of the later ones (None when one is not there)."""
    at: int | None = len(view)
    for record in reversed(records):
        at = next((i for i in range(at - 1, -1, -1) if view[i].get("role") == "user"
                   and view[i].get("content") == record.user), None)
        if at is None:
            return None
    return at


def plain_record(records: list[TurnRecord]) -> str:
    """The record kept without a summary call (a skipped adapter, a failed call)."""
    text = " | ".join(f"{r.adapter} handled: {r.user} -> {r.answer}" for r in records)
    return cut(text, 400 if len(records) == 1 else 800)


async def write(engine: Engine, artifact: Any, records: list[TurnRecord],
                view: list[dict[str, Any]], emit: Emit) -> tuple[str, bool]:
    """The summary of ``records`` (one turn, or a deferred segment of one adapter's
    consecutive turns) and whether the summary hop wrote it (False: the plain record
    after a failed call)."""
    doc = artifact.doc
    config = doc.summary
    answering = records[0].adapter
    if not config.enabled or answering in config.skip:
        return plain_record(records), True
    adapter = doc.summary_adapter(answering)
    extra = {} if config.thinking else dict(doc.engine.thinking_off)
    try:
        completion = await engine.complete(
            adapter, segment_request(artifact, records, view), extra=extra,
            params={"max_tokens": config.max_tokens, "temperature": 0})
        await emit(ev.ModelCalled(adapter, "summary", completion.usage.to_dict(),
                                  round(completion.duration, 6)))
        # A thinking model that spent its budget thinking: its thoughts are the record.
        text = completion.content.strip() or cut(completion.reasoning.strip(), 400)
        if not text:
            raise EngineError("the summary reply was empty")
        summary, ok = f"[{answering}] {text}", True
    except EngineError as exc:
        await emit(ev.Failed("summary", f"{exc}; stored a plain record instead"))
        summary, ok = plain_record(records), False
    await emit(ev.Summarized(adapter, ok, summary))
    return summary, ok


async def summarize(engine: Engine, artifact: Any, record: TurnRecord,
                    view: list[dict[str, Any]], emit: Emit) -> None:
    """Write ``record.summary`` (and ``summary_ok``) for the turn just answered."""
    record.summary, record.summary_ok = await write(engine, artifact, [record], view, emit)
