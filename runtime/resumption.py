"""A turn that goes on from answers given after it (``Session.submit_tool_results``): the
client's results for its tools' calls, and a person's answers for calls of ``ask`` tools
left open for them (``Conversation.asked``). Each call is answered on the adapter that
issued it, in the order it issued them; what an allowed tool did is stored before the next
model call, and a turn still missing answers waits again."""

from __future__ import annotations

from typing import Any

from mol.core.tools import Approval
from mol.runtime import calls, loop
from mol.runtime.hooks import ToolCallInfo
from mol.runtime.turn import Turn, TurnResult
from mol.runtime.views import Conversation, open_calls


async def answers(conversation: Conversation, turn: Turn, cfg: loop.LoopConfig,
                  results: dict[str, str], approvals: dict[str, Approval]
                  ) -> tuple[list[dict[str, Any]], list[str]]:
    """The tool messages the adapter reads next (the approved tools run here) and the ids
    of its calls still open. With approvals given or calls left, the messages are stored
    by this commit (the list returned is then empty)."""
    given = {call_id: await _resume(conversation, turn, cfg, call_id, answer)
             for call_id, answer in approvals.items()}
    given.update(results)
    waiting = open_calls(conversation.view(cfg.adapter))
    order = [c for c in waiting if c in given] + [c for c in given if c not in waiting]
    pending = [{"role": "tool", "tool_call_id": call_id, "content": given[call_id]}
               for call_id in order]
    left = [c for c in waiting if c not in given]
    if approvals or left:  # what an allowed tool did is stored before anything else
        await turn.commit(pending, waiting=bool(left))
        pending = []
    return pending, left


async def _resume(conversation: Conversation, turn: Turn, cfg: loop.LoopConfig, call_id: str,
                  answer: Approval) -> str:
    """The result of the call ``call_id`` a person answered after its turn."""
    asked = conversation.asked[call_id]
    call = ToolCallInfo(asked["name"], asked["arguments"], call_id, cfg.adapter,
                        asked.get("source", "builtin"))
    result = await calls.resume(cfg, turn, call, answer)
    conversation.close_asked(call_id, ("was allowed" if answer.allow else "was denied")
                             + (f": {answer.reason}" if answer.reason else ""))
    return result.content


def still_waiting(conversation: Conversation, turn: Turn, left: list[str]) -> TurnResult:
    """The turn waits again (stored so by ``answers``' commit), for the calls ``left``."""
    result = turn.result
    view = conversation.view(turn.adapter)
    message = next(m for m in reversed(view) if m.get("tool_calls"))
    asked = conversation.asked
    result.client_calls = [c for c in message["tool_calls"]
                           if c["id"] in left and c["id"] not in asked]
    result.asked = [{"id": c, **{k: asked[c][k] for k in ("name", "arguments", "source")}}
                    for c in left if c in asked and "ended" not in asked[c]]
    result.status, result.stopped = "waiting", "client_tools"
    return result
