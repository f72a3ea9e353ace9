"""One owner per turn: a session's turn tells every observer every event, in order, sums
its usage once, and hands its checkpoints the turn's own log."""

from __future__ import annotations

import pytest

from mol.core import events as ev
from mol.runtime import Runtime
from mol.runtime.testing import ScriptedEngine

from .conftest import toy_plugins, write_hcp

pytestmark = pytest.mark.anyio

SCRIPT = """
[[L0]]
constrained = true
reply = "L1"
[[L1]]
tool_calls = [{ name = "echo", arguments = { text = "hi" } }]
usage = { prompt_tokens = 30, completion_tokens = 4, cached_tokens = 20 }
[[L1]]
reply = "echoed"
usage = { prompt_tokens = 50, completion_tokens = 6, cached_tokens = 30 }
[[L0]]
constrained = false
reply = "summary"
"""


async def test_every_observer_sees_every_event_in_order_and_usage_is_summed_once(tmp_path):
    seen_sync: list[ev.Event] = []
    seen_async: list[ev.Event] = []

    async def slow_observer(event: ev.Event) -> None:
        seen_async.append(event)

    async with ScriptedEngine.serve(SCRIPT) as engine:
        runtime = Runtime(write_hcp(tmp_path), engine_url=engine.base_url,
                          plugins=toy_plugins())
        async with runtime.session(observers=[seen_sync.append, slow_observer]) as session:
            result = await session.turn("say hi")
    assert result.answer == "echoed"
    assert seen_sync == seen_async == result.events
    kinds = [e.type for e in result.events]
    assert kinds.index("route") < kinds.index("tool_call") < kinds.index("answer")
    calls = [e for e in result.events if isinstance(e, ev.ModelCalled)]
    assert [c.purpose for c in calls] == ["route", "answer", "answer", "summary"]
    usage = session.current.usage
    assert usage.prompt_tokens == sum(c.usage["prompt_tokens"] for c in calls)
    assert usage.completion_tokens == sum(c.usage["completion_tokens"] for c in calls)
    assert usage.cached_tokens == sum(c.usage["cached_tokens"] or 0 for c in calls) >= 50
    assert usage.calls == {"route": 1, "answer": 2, "summary": 1}
    assert result.usage == usage.totals()


async def test_checkpoints_get_the_turn_and_its_log_so_far(tmp_path):
    points: list[tuple[str, int, int]] = []

    async def checkpoint(conversation, record, turn, durable=True):
        assert turn.record is record and turn.events[-1] is not None
        points.append((record.status, len(turn.events), turn.usage.prompt_tokens))

    async with ScriptedEngine.serve(SCRIPT) as engine:
        runtime = Runtime(write_hcp(tmp_path), engine_url=engine.base_url,
                          plugins=toy_plugins())
        async with runtime.session(checkpoint=checkpoint) as session:
            await session.turn("say hi")
    # Begun (not durable), the tool step, the answer, the end: the log only grows.
    assert [status for status, _, _ in points] == ["running"] * 3 + ["complete"]
    assert [n for _, n, _ in points] == sorted(n for _, n, _ in points)
    assert points[-1][2] == session.current.usage.prompt_tokens


def test_turn_usage_since_counts_only_what_came_after():
    usage = ev.TurnUsage()
    usage.add(ev.ModelCalled("L1", "answer", {"prompt_tokens": 10, "completion_tokens": 2,
                                              "cached_tokens": None}, 0.1))
    then = usage.copy()
    usage.add(ev.ModelCalled("L1", "answer", {"prompt_tokens": 15, "completion_tokens": 3,
                                              "cached_tokens": 8}, 0.1))
    later = usage.since(then)
    assert (later.prompt_tokens, later.completion_tokens, later.cached_tokens) == (15, 3, 8)
    assert later.calls == {"answer": 1} and then.calls == {"answer": 1}
    assert usage.totals() == {"prompt_tokens": 25, "completion_tokens": 5}
