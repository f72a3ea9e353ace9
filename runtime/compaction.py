"""Compaction: each adapter's view kept within its own context window.

Before every answer-hop request, the agent loop asks the turn to ``fit`` it: when the
request (the view the engine sees, what the turn adds, the tools, the reply's budget)
would fill more than ``threshold`` of the adapter's window (``mol.runtime.windows``), the
adapter's ``[compaction] mode`` decides:

- ``compact``: the older part of the view is summarized, and from then on the engine sees
  the system prompt, that summary, and the recent part verbatim
  (``Conversation.engine_view``); when the engine answers that a request was too long
  anyway, the view is compacted once more and the request retried, once;
- ``error``: the turn is refused before the engine is called (``ContextTooLong``, naming
  the adapter, its window and the request's size);
- ``off``: the request goes as it is.

What compaction keeps: the system prompt and the tools, byte for byte (the prefix the
engine caches; the adapter writing its own summary sends its own view's prefix and tools,
so the engine evaluates only the instruction and the summary); the most recent
``keep_recent_tokens`` verbatim, in whole steps (a tool call is never separated from its
results, and what the turn has not committed yet, an open call included, always stays);
everything older, the other adapters' summaries and earlier compactions included, goes
into the summary. The compaction is a record of the conversation (nothing of the view is
removed: a fork from an earlier point still has it), checkpointed with the state, so a
crash leaves the view as it was before or after, never between.

``PreCompact`` hooks and plugins may block a compaction or add instructions for it;
``PostCompact`` sees the sizes. Each compaction emits ``Compacting``, the summary's
``ModelCalled`` (purpose ``compaction``) and ``Compacted``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from mol.core import events as ev
from mol.core import tracing
from mol.core.errors import ContextTooLong, EngineContextLength, EngineError
from mol.runtime import lifecycle
from mol.runtime.hooks import Block, PluginFailed, call_plugin, plugin_impls
from mol.runtime.summary import cut, with_identity
from mol.runtime.views import open_step, summary_message
from mol.runtime.windows import CHARS_PER_TOKEN, Measure, chars, estimate

DEFAULT_PROMPT = (
    "This conversation is about to be shortened: everything before this message will be "
    "replaced by what you write now. Write it for yourself, so that you can go on without "
    "the rest: the user's goals and constraints, what was decided and why, what was done "
    "(files, commands and results that still matter), what is still open, and anything the "
    "user asked you to keep. Be specific and brief. Do not call tools; answer with the "
    "summary only."
)
TEXT_LIMIT = 24000
"""Characters of the compacted part an adapter writing another's summary reads as text."""


@dataclass
class Policy:
    """One adapter's compaction settings, resolved, and its window."""

    mode: str
    threshold: float
    keep_recent_tokens: int
    writer: str
    prompt: str
    max_tokens: int
    window: int
    known: bool = True
    """Whether ``window`` is known (set or reported by the engine), not assumed."""

    @property
    def limit(self) -> int:
        """Tokens a request may take before the view is compacted."""
        return math.floor(self.window * self.threshold)


async def policy(session: Any, adapter: str) -> Policy:
    """``adapter``'s compaction settings in ``session``."""
    artifact = session.artifact
    config = artifact.doc.compaction_for(adapter)
    window = await session.runtime.windows.of(adapter)
    own = artifact.prompt(f"adapters.{adapter}.compaction.prompt")
    keep = config.keep_recent_tokens
    return Policy(config.mode, config.threshold, window // 4 if keep is None else keep,
                  config.adapter or adapter,
                  own or artifact.prompt("compaction.prompt") or DEFAULT_PROMPT,
                  config.max_tokens, window, await session.runtime.windows.known(adapter))


def size_of(session: Any, adapter: str, messages: list[dict[str, Any]],
            tools: list[dict[str, Any]] | None) -> int:
    """The estimated tokens of a request of ``adapter`` (``mol.runtime.windows.estimate``)."""
    conversation = session.conversation
    kept = conversation.measures.get(adapter)
    return estimate(messages, tools, Measure(*kept) if kept else None,
                    len(conversation.compactions.get(adapter, [])))


def measured(session: Any, adapter: str, messages: list[dict[str, Any]],
             usage: Any) -> None:
    """Keep the engine's count of a request of ``adapter`` (its ``messages`` and reply)."""
    tokens = (usage.prompt_tokens or 0) + (usage.completion_tokens or 0)
    if usage.prompt_tokens:
        conversation = session.conversation
        conversation.measures[adapter] = Measure(
            tokens, len(messages) + 1, chars(messages),
            len(conversation.compactions.get(adapter, []))).to_list()


async def fit(turn: Any, adapter: str, view: list[dict[str, Any]],
              pending: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
              budget: int, overflowed: bool = False) -> list[dict[str, Any]] | None:
    """The engine's new view of ``adapter`` when the request of ``view + pending`` had to be
    compacted to fit (``overflowed``: the engine said it did not), else None;
    ``ContextTooLong`` when it may not be, or cannot be."""
    session = turn.session
    size = size_of(session, adapter, view + pending, tools) + budget
    if not overflowed and session.compact_at is None and session.runtime.windows.unasked(
            adapter, size):
        return None  # fits any window: the engine is not asked for its own
    rules = await policy(session, adapter)
    if rules.mode == "off":
        return None
    limit = rules.limit if session.compact_at is None else min(rules.limit, session.compact_at)
    if size <= limit and not overflowed:
        return None
    if rules.mode == "error":
        raise _too_long(adapter, rules, size, 'its [compaction] mode is "error"')
    trigger = "overflow" if overflowed else "auto"
    if limit < rules.limit:  # a client's lower threshold: keep at most half of it verbatim
        rules = dataclasses.replace(rules, keep_recent_tokens=min(rules.keep_recent_tokens,
                                                                  limit // 2))
    compacted = await compact(turn, adapter, trigger, rules=rules, view=view, pending=pending,
                              tools=tools)
    # Over an assumed window, the engine decides: a request it refuses is compacted once more
    # (overflowed) and then ends as ContextTooLong.
    if compacted is None and size > rules.window and (rules.known or overflowed):
        raise _too_long(adapter, rules, size, "its view could not be compacted (too little of "
                        "it is old enough, or a hook blocked the compaction)")
    return compacted


async def compact(turn: Any, adapter: str, trigger: str, instructions: str = "", *,
                  rules: Policy | None = None, view: list[dict[str, Any]] | None = None,
                  pending: list[dict[str, Any]] = (), tools: list[dict[str, Any]] | None = None
                  ) -> list[dict[str, Any]] | None:
    """Compact ``adapter``'s view in ``turn``'s session (``view``: the engine's view the loop
    holds, ``pending``: what the turn has not committed yet, ``tools``: the request's
    tools). A ``manual`` compaction keeps nothing verbatim but a last tool step that may
    still be open. Returns the engine's new view, or None when nothing was compacted (only
    the system prompt and a summary are there, or a hook blocked it)."""
    session = turn.session
    conversation = session.conversation
    if rules is None:
        rules = await policy(session, adapter)
        if trigger == "manual":  # asked for: all of it, as /compact does elsewhere
            rules = dataclasses.replace(rules, keep_recent_tokens=0)
    shown = conversation.engine_view(adapter) if view is None else view
    keep_from = keep_point(shown, rules.keep_recent_tokens, pending,
                           first=2 if conversation.compactions.get(adapter) else 1)
    if keep_from is None:
        return None
    extra = await _before(turn, adapter, trigger, instructions)
    if extra is None:
        return None
    before = size_of(session, adapter, shown + list(pending), tools)
    # A root when nothing is traced around it (mol sessions compact), else its child.
    with tracing.root(session.runtime.tracer, "compaction", adapter=adapter, trigger=trigger):
        await turn.emit(ev.Compacting(adapter, trigger))
        writer, summary = await _summary(turn, adapter, rules, shown[:keep_from],
                                         "\n\n".join(p for p in (instructions, extra) if p),
                                         tools)
        record = conversation.compact(adapter, keep_from, summary, trigger=trigger,
                                      writer=writer, tokens_before=before)
        after_view = conversation.engine_view(adapter)
        after = size_of(session, adapter, after_view + list(pending), tools)
        record["tokens_after"] = after
        await turn.checkpoint()
        await turn.emit(ev.Compacted(adapter, trigger, writer, before, after,
                                     len(after_view) - 2, record["id"]))
    await _after(turn, adapter, trigger, before, after)
    return after_view


def keep_point(view: list[dict[str, Any]], keep_tokens: int,
               pending: list[dict[str, Any]] = (), first: int = 1) -> int | None:
    """The index of the first message of ``view`` kept verbatim: the most recent messages
    worth ``keep_tokens`` (estimated; what the turn has not committed, ``pending``, counts
    first), starting at a step (never at a tool result, so no call loses its results), and
    never after the view's last tool step (its calls may still wait for results). None when
    nothing before it can be compacted (``first``: the first index that may be)."""
    point = open_step(view)
    left = keep_tokens - _tokens(list(pending))
    while point > first and left >= _tokens([view[point - 1]]):
        left -= _tokens([view[point - 1]])
        point -= 1
    while first < point < len(view) and view[point].get("role") == "tool":
        point -= 1  # back to the call these results answer
    return point if point > first else None


def _tokens(messages: list[dict[str, Any]]) -> int:
    return math.ceil(chars(messages) / CHARS_PER_TOKEN) if messages else 0


async def _summary(turn: Any, adapter: str, rules: Policy, old: list[dict[str, Any]],
                   instructions: str, tools: list[dict[str, Any]] | None) -> tuple[str, str]:
    """``(writer, summary)`` of the ``old`` part of ``adapter``'s view: written by the
    adapter itself from its own prefix when it fits (the engine evaluates only what is
    new), else, or when the engine says it did not fit, from the old part as text, cut to
    fit the writer's window."""
    session = turn.session
    doc = session.artifact.doc
    prompt = rules.prompt + (f"\n\nAlso: {instructions}" if instructions else "")
    ask = {"role": "user", "content": prompt}
    writer = rules.writer
    window = rules.window if writer == adapter else await session.runtime.windows.of(writer)
    room = (window - rules.max_tokens - _tokens([ask])) * CHARS_PER_TOKEN * 0.8
    text = cut("\n\n".join(_line(m) for m in old[1:]), max(400, min(TEXT_LIMIT, int(room))))
    attempts = [with_identity([{"role": "system", "content": prompt},
                               {"role": "user", "content": text}],
                              session.artifact.prompt("model.identity"))]
    if writer == adapter and size_of(session, adapter, old, tools) + _tokens([ask]) \
            + rules.max_tokens < window:
        attempts.insert(0, [*old, ask])  # its own prefix, tools included
    for number, messages in enumerate(attempts):
        try:
            completion = await session.engine.complete(
                writer, messages, tools=(tools or None) if messages[-1] is ask else None,
                extra=dict(doc.engine.thinking_off),
                params={"max_tokens": rules.max_tokens, "temperature": 0})
        except EngineContextLength:
            if number + 1 < len(attempts):
                continue
            raise
        except EngineError as exc:
            await turn.emit(ev.Failed("compaction", f"{exc}; kept a plain record instead"))
            return writer, cut(text, 2000)
        await turn.emit(ev.ModelCalled(writer, "compaction", completion.usage.to_dict(),
                                       round(completion.duration, 6)))
        summary = completion.content.strip() or cut(completion.reasoning.strip(), 2000)
        return writer, summary or cut(text, 2000)
    raise AssertionError("unreachable: the last attempt returns or raises")


def _line(message: dict[str, Any]) -> str:
    """One message of the compacted part, as plain text."""
    role = message.get("role", "")
    content = message.get("content")
    text = content if isinstance(content, str) else "" if content is None else str(content)
    calls = [f"{c['function']['name']}({c['function']['arguments']})"
             for c in message.get("tool_calls") or []]
    return f"{role}: {cut(text, 2000)}" + (f" [calls: {', '.join(calls)}]" if calls else "")


async def _before(turn: Any, adapter: str, trigger: str, instructions: str) -> str | None:
    """Run ``PreCompact`` (plugins, then command hooks): the instructions they add, or None
    when one of them blocks the compaction."""
    session = turn.session
    runtime = session.runtime
    added: list[str] = []
    context = _context(session, adapter)
    for impl in plugin_impls(runtime.plugins.hook.mol_before_compaction):
        outcome = await call_plugin(impl, "mol_before_compaction", adapter=adapter,
                                    trigger=_matcher(trigger), instructions=instructions,
                                    context=context)
        if isinstance(outcome, Block | PluginFailed):
            await turn.emit(ev.HookDecided("plugin", "", "block", str(getattr(
                outcome, "reason", outcome)), event="PreCompact"))
            return None
        if isinstance(outcome, str) and outcome.strip():
            added.append(outcome.strip())
    verdict = await lifecycle.pre_compact(
        [s for s in runtime.hook_sets if s.applies(adapter)], session.conversation.id,
        adapter, _matcher(trigger), instructions, turn.emit)
    if verdict.blocked is not None:
        return None
    return "\n\n".join(added + verdict.context)


async def _after(turn: Any, adapter: str, trigger: str, before: int, after: int) -> None:
    session = turn.session
    runtime = session.runtime
    context = _context(session, adapter)
    for impl in plugin_impls(runtime.plugins.hook.mol_after_compaction):
        await call_plugin(impl, "mol_after_compaction", adapter=adapter,
                          trigger=_matcher(trigger), before=before, after=after,
                          context=context)
    await lifecycle.post_compact([s for s in runtime.hook_sets if s.applies(adapter)],
                                 session.conversation.id, adapter, _matcher(trigger), before,
                                 after, turn.emit)


def _matcher(trigger: str) -> str:
    """Claude Code's trigger names: a compaction the window forced is ``auto``."""
    return "manual" if trigger == "manual" else "auto"


def _context(session: Any, adapter: str) -> Any:
    from mol.core.tools import ToolContext

    return ToolContext(adapter=adapter, session_id=session.conversation.id,
                       artifact=session.artifact, resources=session.resources)


def _too_long(adapter: str, rules: Policy, size: int, why: str) -> ContextTooLong:
    share = f"{rules.threshold:.0%}"
    return ContextTooLong(
        f"the request of {adapter} would take about {size} tokens of its {rules.window}-token "
        f"context window, more than the {share} it may fill ({rules.limit} tokens); {why}. "
        "Start a new conversation or send less", adapter=adapter, window=rules.window,
        size=size)


__all__ = ["DEFAULT_PROMPT", "Policy", "compact", "fit", "keep_point", "measured", "policy",
           "size_of", "summary_message"]
