"""The hook events of a turn, beyond the tool calls (see docs/hooks.md).

=================  =========================================  ===============================
event              when                                       what a hook may do
=================  =========================================  ===============================
SessionStart       before a runtime's first turn of a          add context every adapter reads
                   conversation (``source``: startup/resume)   at its next turn
UserPromptSubmit   before the turn is routed (``prompt``)      block it (no model sees it), or
                                                               add context for the turn
SubagentStart      the router handed the turn to an adapter    add context for that adapter
                   (``agent_type``: the adapter)
Stop               the answering adapter is about to end the   block: the adapter goes on with
                   turn (``last_assistant_message``)           the reason as an instruction
SubagentStop       the turn's summary is about to be handed    block: the other adapters do
                   to the other adapters                       not get this summary
PreCompact         an adapter's view is about to be compacted  block the compaction, or add
                   (``trigger``: manual/auto)                  instructions for its summary
PostCompact        an adapter's view was compacted             see the sizes before and after
=================  =========================================  ===============================

Each function runs the event's hooks, emits a ``hook`` event per decision and
returns the ``Verdict``. A hook that fails where the event cannot be blocked
is reported (decision ``ignored``) and changes nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mol.core import events as ev
from mol.runtime.hooks import HookSet, Verdict, run_hooks

Emit = Callable[[ev.Event], Awaitable[None]]

BLOCKABLE = ("PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop", "SubagentStop",
             "PreCompact")
"""Events a hook can block; at the others a block is reported and ignored."""
FAIL_CLOSED = ("PreToolUse", "PostToolUse", "UserPromptSubmit")
"""Events where a hook that fails with ``on_error = "block"`` blocks; at ``Stop`` and
``SubagentStop`` a failure must not keep an adapter going or hide a summary."""


def hook_sets(artifact: Any) -> list[HookSet]:
    """The artifact's own hooks (every adapter) and those of each bundle some adapter uses;
    a place with no hooks at all is left out (an event then costs nothing)."""
    from mol.hcp.expand import bundle_users

    project = {"CLAUDE_PROJECT_DIR": str(artifact.base_dir)}
    sets = [HookSet(artifact.doc.hooks, artifact.base_dir, None, project)]
    users = bundle_users(artifact.doc)
    for name, bundle in sorted(getattr(artifact, "bundles", {}).items()):
        if users.get(name):
            sets.append(HookSet(bundle.hooks, bundle.folder, frozenset(users[name]),
                                {**project, "CLAUDE_PLUGIN_ROOT": str(bundle.folder)}))
    return [each for each in sets if _any_hook(each.hooks)]


def _any_hook(hooks: Any) -> bool:
    return any(getattr(hooks, event) for event in type(hooks).model_fields)


def base_payload(event: str, session_id: str, **fields: Any) -> dict[str, Any]:
    """Claude Code's common input fields, then the event's own."""
    return {"session_id": session_id, "hook_event_name": event,
            "permission_mode": "default", **fields}


async def fire(sets: list[HookSet], event: str, payload: dict[str, Any], emit: Emit,
               subject: str | None = None, adapter: str | None = None,
               tool: str = "", call_id: str = "") -> Verdict:
    """Run ``event``'s hooks and emit their decisions; a block the event cannot take (see
    ``BLOCKABLE`` and ``FAIL_CLOSED``) is emptied and reported as ``ignored``."""
    if not any(getattr(s.hooks, event) for s in sets if s.applies(adapter)):
        return Verdict()
    verdict = await run_hooks(sets, event, payload, subject=subject, adapter=adapter)
    refused = event not in BLOCKABLE or (verdict.failed and event not in FAIL_CLOSED)
    if verdict.blocked is not None and refused:
        verdict.decisions[-1] = (verdict.decisions[-1][0], "ignored", verdict.blocked)
        verdict.blocked = None
    for hook, decision, reason in verdict.decisions:
        await emit(ev.HookDecided(hook, tool, decision, reason, event=event, call_id=call_id))
    return verdict


async def session_start(sets: list[HookSet], session_id: str, resumed: bool,
                        emit: Emit) -> Verdict:
    """``SessionStart``: ``source`` is ``resume`` when the conversation has turns already."""
    source = "resume" if resumed else "startup"
    payload = base_payload("SessionStart", session_id, source=source)
    return await fire(sets, "SessionStart", payload, emit, subject=source)


async def prompt_submit(sets: list[HookSet], session_id: str, prompt: str,
                        emit: Emit) -> Verdict:
    """``UserPromptSubmit``: may block the turn or add context (before routing)."""
    payload = base_payload("UserPromptSubmit", session_id, prompt=prompt)
    return await fire(sets, "UserPromptSubmit", payload, emit)


async def subagent_start(sets: list[HookSet], session_id: str, adapter: str, turn: int,
                         emit: Emit) -> Verdict:
    """``SubagentStart``: the router handed turn ``turn`` to ``adapter``."""
    payload = base_payload("SubagentStart", session_id, agent_id=f"{session_id}:{turn}",
                           agent_type=adapter)
    return await fire(sets, "SubagentStart", payload, emit, subject=adapter, adapter=adapter)


async def stop(sets: list[HookSet], session_id: str, adapter: str, answer: str,
               active: bool, emit: Emit) -> Verdict:
    """``Stop``: ``active`` says a Stop hook already made this turn go on."""
    payload = base_payload("Stop", session_id, stop_hook_active=active,
                           last_assistant_message=answer, adapter=adapter)
    return await fire(sets, "Stop", payload, emit, adapter=adapter)


async def subagent_stop(sets: list[HookSet], session_id: str, adapter: str, turn: int,
                        answer: str, summary: str, emit: Emit) -> Verdict:
    """``SubagentStop``: the summary of ``adapter``'s turn is about to reach the others."""
    payload = base_payload("SubagentStop", session_id, agent_id=f"{session_id}:{turn}",
                           agent_type=adapter, stop_hook_active=False,
                           last_assistant_message=answer, summary=summary)
    return await fire(sets, "SubagentStop", payload, emit, subject=adapter, adapter=adapter)


async def pre_compact(sets: list[HookSet], session_id: str, adapter: str, trigger: str,
                      instructions: str, emit: Emit) -> Verdict:
    """``PreCompact``: ``trigger`` is ``manual`` (asked for) or ``auto`` (the window filled);
    ``custom_instructions`` what the asker added. A block keeps the view as it is; a hook's
    context is added to the compaction's instructions."""
    payload = base_payload("PreCompact", session_id, trigger=trigger,
                           custom_instructions=instructions, adapter=adapter)
    return await fire(sets, "PreCompact", payload, emit, subject=trigger, adapter=adapter)


async def post_compact(sets: list[HookSet], session_id: str, adapter: str, trigger: str,
                       before: int, after: int, emit: Emit) -> Verdict:
    """``PostCompact``: the sizes of the adapter's view before and after, in tokens."""
    payload = base_payload("PostCompact", session_id, trigger=trigger, adapter=adapter,
                           tokens_before=before, tokens_after=after)
    return await fire(sets, "PostCompact", payload, emit, subject=trigger, adapter=adapter)
