"""Hop 3, the summary: a short record of each turn for the other adapters.

The ``[summary]`` adapter writes it; it is kept runtime-side, queued for the
other adapters' next turns, and never reaches the client. A failed summary call
stores a plain truncated record instead and never fails the turn.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from mol.hcp.loader import Artifact
from mol.runtime import events as ev
from mol.runtime.engine import Engine
from mol.runtime.errors import EngineError
from mol.runtime.views import TurnRecord

DEFAULT_SUMMARY_PROMPT = (
    "Summarize the turn below for the other specialists of this assistant in at most two "
    "sentences: what the user wanted, what was done and the outcome. Plain text."
)
SUMMARY_INPUT_LIMIT = 4000
"""Characters of the turn the summary hop reads (long answers are cut in the middle)."""


def cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters in the middle, with a marker."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]} [...] {text[-half:]}"


async def summarize(artifact: Artifact, engine: Engine, record: TurnRecord,
                    emit: Callable[[ev.Event], Awaitable[None]]) -> None:
    """Hop 3: a short record of the turn for the other adapters (never for the client)."""
    config = artifact.doc.summary
    tools = ", ".join(record.tools) or "none"
    plain = cut(f"{record.adapter} handled: {record.user} -> {record.answer}", 400)
    if not config.enabled:
        record.summary, record.summary_ok = plain, True
        return
    prompt = artifact.prompt_text(config.prompt) or DEFAULT_SUMMARY_PROMPT
    body = cut(f"User: {record.user}\n\nAnswered by {record.adapter}: {record.answer}\n\n"
               f"Tools used: {tools}", SUMMARY_INPUT_LIMIT)
    messages = [{"role": "system", "content": prompt}, {"role": "user", "content": body}]
    try:
        completion = await engine.complete(
            config.adapter, messages, params={"max_tokens": config.max_tokens,
                                              "temperature": 0})
        text = completion.content.strip()
        await emit(ev.ModelCalled(config.adapter, "summary", completion.usage.to_dict(),
                                  round(completion.duration, 6)))
        if not text:
            raise EngineError("the summary reply was empty")
        record.summary, record.summary_ok = f"[{record.adapter}] {text}", True
    except EngineError as exc:
        await emit(ev.Failed("summary", f"{exc}; stored a plain record instead"))
        record.summary, record.summary_ok = plain, False
    await emit(ev.Summarized(config.adapter, record.summary_ok, record.summary))
