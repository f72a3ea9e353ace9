"""What the agent loop works with for one adapter in one turn (``LoopConfig``): the adapter's
tools under its policy (narrowed by a slash command's ``allowed-tools``), the client's
tools, its hooks, the GenUI review of its answers, and the context its tools run in."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from fnmatch import fnmatchcase
from typing import Any

from mol.core import events as ev
from mol.core.tools import ToolContext, with_tool
from mol.runtime import loop
from mol.runtime.turn import Turn


async def equip(session: Any, turn: Turn, adapter: str,
                client_tools: list[dict[str, Any]] | None, stream: bool,
                params: dict[str, Any] | None,
                narrow: list[str] | None = None) -> loop.LoopConfig:
    """What the loop works with for ``adapter`` in ``session``'s ``turn``; ``narrow`` keeps
    only the tools matching those patterns (a slash command's ``allowed-tools``)."""
    runtime = session.runtime
    all_tools = await session.all_tools(adapter)
    config = session.artifact.doc.adapter(adapter)
    review = _review(adapter, config, turn.emit)
    if review is not None and config.genui.tool:  # type: ignore[union-attr]
        all_tools = with_tool(all_tools, review.tool())
    turn.reviewer = review.answer if review is not None else None
    tools = runtime.by_policy(adapter, all_tools)
    if narrow is not None:
        tools = {n: t for n, t in tools.items() if any(fnmatchcase(n, p) for p in narrow)}
    context = ToolContext(adapter=adapter, session_id=session.conversation.id,
                          artifact=session.artifact, resources=session.resources,
                          sandbox_pool=runtime.sandbox_pool, elicit=session.elicit)
    return loop.LoopConfig(
        engine=session.engine, adapter=adapter, config=config, tools=tools,
        all_tools=all_tools, client_tools=_client_tools(client_tools), context=context,
        tool_hooks=runtime.tool_hooks,
        hook_sets=[s for s in runtime.hook_sets if s.applies(adapter)],
        stream=stream and review is None, overrides=dict(params or {}))


def _review(adapter: str, config: Any, emit: Callable[[ev.Event], Awaitable[None]]) -> Any:
    """The turn's GenUI checks when the adapter has them on. Its answers are then not
    streamed: a UI reaches the client only once checked (or out of repair rounds)."""
    if config.genui is None or not config.genui.enabled:
        return None
    from mol.genui.review import Review

    return Review(adapter, config.genui, emit)


def _client_tools(tools: list[dict[str, Any]] | None) -> dict[str, dict[str, Any]]:
    """Client-provided OpenAI ``tools`` entries by function name."""
    out: dict[str, dict[str, Any]] = {}
    for entry in tools or []:
        function = entry.get("function") if isinstance(entry, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            out[function["name"]] = entry
    return out
