"""Hops 2 and 3: per-adapter views, pinned tool results, prefix stability, summaries."""

import itertools
import json

import pytest

from mol.runtime.testing import ScriptedEngine
from mol.runtime.views import adapter_of_call

from .conftest import bodies, is_route, session

pytestmark = pytest.mark.anyio

LOCATION = {"type": "function", "function": {
    "name": "get_location", "description": "The user's location.",
    "parameters": {"type": "object", "properties": {}}}}
"""A tool the client provides."""

SUMMARY = """
[[L0]]
constrained = false
when = "Answered by"
times = -1
reply = "summary of the turn"
"""


async def test_tool_results_go_straight_back_to_the_caller(hcp):
    script = """
[[L0]]
constrained = true
reply = "L2"
[[L2]]
tool_calls = [{ name = "echo", arguments = { text = "ping" } }, { name = "add", arguments = { a = 2, b = 3 } }]
[[L2]]
when = "^5$"
reply = "echo said PING"
""" + SUMMARY
    async with ScriptedEngine.serve(script) as engine, session(hcp, engine) as h:
        result = await h.turn("run the tools")
    assert result.answer == "echo said PING"
    sequence = [(r["adapter"], is_route(r["body"])) for r in engine.requests]
    # route, L2 asks for tools, L2 gets the results: no routing request in between.
    assert sequence[:3] == [("L0", True), ("L2", False), ("L2", False)]
    first, second = bodies(engine, "L2")
    calls = second["messages"][-3]["tool_calls"]
    assert [adapter_of_call(c["id"]) for c in calls] == ["L2", "L2"]
    results = second["messages"][-2:]
    assert [(m["role"], m["tool_call_id"], m["content"]) for m in results] == [
        ("tool", calls[0]["id"], "PING"), ("tool", calls[1]["id"], "5")]
    # The second request is exactly the first plus the call and its results.
    assert second["messages"] == [*first["messages"], second["messages"][-3], *results]
    assert engine.unused_rules() == []


async def test_client_tool_results_resume_on_the_issuing_adapter(hcp):
    client_tool = LOCATION
    script = """
[[L0]]
constrained = true
reply = "L1"
[[L1]]
tool_calls = [{ name = "get_location", arguments = {} }]
[[L1]]
when = "Lisbon"
reply = "You are in Lisbon."
""" + SUMMARY
    async with ScriptedEngine.serve(script) as engine, session(hcp, engine) as h:
        first = await h.turn("where am I?", client_tools=[client_tool])
        assert first.status == "waiting" and first.adapter == "L1"
        [call] = first.client_calls
        assert call["id"].startswith("call_L1_")
        second = await h.submit_tool_results({call["id"]: "Lisbon"}, client_tools=[client_tool])
    assert second.status == "complete" and second.answer == "You are in Lisbon."
    assert [is_route(b) for b in bodies(engine)] == [True, False, False, False]
    assert bodies(engine, "L1")[1]["messages"][-1] == {
        "role": "tool", "tool_call_id": call["id"], "content": "Lisbon"}
    assert "get_location" in json.dumps(bodies(engine, "L1")[0]["tools"])


async def test_unknown_call_ids_are_refused(hcp):
    from mol.core.errors import ConversationError

    async with ScriptedEngine.serve("[[L0]]\nreply = 'x'\n") as engine, session(hcp, engine) as h:
        with pytest.raises(ConversationError, match="unknown call ids"):
            await h.submit_tool_results({"call_abc": "x"})
    assert engine.requests == []


async def test_prefix_stability_over_ten_alternating_turns(hcp):
    order = ["L0", "L1", "L2", "L3", "L2", "L0", "L1", "L3", "L2", "L1"]
    script = ""
    for index, adapter in enumerate(order):
        script += f'[[L0]]\nconstrained = true\nwhen = "turn {index}\\\\b"\nreply = "{adapter}"\n'
    for adapter in ("L0", "L1", "L2", "L3"):
        script += (f'[[{adapter}]]\nconstrained = false\nwhen = "^turn"\ntimes = -1\n'
                   f'reply = "answer from {adapter}"\n')
    script += SUMMARY
    async with ScriptedEngine.serve(script) as engine, session(hcp, engine) as h:
        for index in range(len(order)):
            result = await h.turn(f"turn {index} please")
            assert result.adapter == order[index]
    answers = [r for r in engine.requests if not is_route(r["body"])
               and "Answered by" not in json.dumps(r["body"]["messages"][-1])]
    assert [r["adapter"] for r in answers] == order
    for adapter in ("L0", "L1", "L2", "L3"):
        requests = [r["body"]["messages"] for r in answers if r["adapter"] == adapter]
        for previous, current in itertools.pairwise(requests):
            assert current[: len(previous)] == previous, f"{adapter} view was rewritten"
            added = current[len(previous):]
            # what the adapter said, then (only appended) the others' summaries, then the user
            assert added[0]["role"] == "assistant"
            assert added[-1]["role"] == "user" and added[-1]["content"].startswith("turn")
            for message in added[1:-1]:
                assert "summary of the turn" in message["content"]
        system = [m for m in requests[0] if m["role"] == "system"]
        assert len(system) == 1 and requests[0][0] is not None
    # L2's third turn (turn 8) carries the summaries of turns 5-7, in order, as one message.
    l2 = [r["body"]["messages"] for r in answers if r["adapter"] == "L2"]
    context = l2[2][-2]["content"]
    assert context.splitlines()[1:] == [f"- [{a}] summary of the turn" for a in ("L0", "L1", "L3")]


async def test_summary_never_reaches_the_client(hcp):
    script = """
[[L0]]
constrained = true
reply = "L3"
[[L3]]
reply = "<Button/>"
[[L0]]
constrained = false
reply = "SECRET-SUMMARY"
"""
    seen = []
    async with ScriptedEngine.serve(script) as engine, session(hcp, engine) as h:
        h.observers.append(seen.append)
        result = await h.turn("draw a button")
    assert result.answer == "<Button/>"
    assert "SECRET-SUMMARY" not in result.answer
    assert h.conversation.turns[0].summary == "[L3] SECRET-SUMMARY"
    assert h.conversation.pending["L2"] == [
        {"adapter": "L3", "user": "draw a button", "summary": "[L3] SECRET-SUMMARY"}]
    assert h.conversation.pending.get("L3", []) == []
    assert engine.unused_rules() == []


async def test_failing_summary_still_completes_the_turn(hcp):
    script = """
[[L0]]
constrained = true
reply = "L2"
[[L2]]
reply = "fixed it"
[[L0]]
constrained = false
error = { status = 500, message = "summary engine down" }
"""
    async with ScriptedEngine.serve(script) as engine, session(hcp, engine) as h:
        result = await h.turn("fix it")
    assert result.status == "complete" and result.answer == "fixed it"
    record = h.conversation.turns[0]
    assert not record.summary_ok and record.summary == "L2 handled: fix it -> fixed it"
    failure = next(e for e in result.events if e.type == "error")
    assert failure.where == "summary" and "plain record" in failure.message


async def test_cancelled_turn_leaves_the_view_consistent(hcp):
    import anyio

    script = """
[[L0]]
constrained = true
reply = "L2"
[[L2]]
delay = 30
reply = "too late"
"""
    async with ScriptedEngine.serve(script) as engine, session(hcp, engine) as h:
        with anyio.move_on_after(1.0):
            await h.turn("slow one")
        assert h.conversation.turns[0].status == "interrupted"
        assert h.conversation.view("L2") == []  # nothing half-written
    assert len(engine.requests) == 2


async def test_streaming_emits_text_deltas_and_the_same_answer(hcp):
    script = """
[[L0]]
constrained = true
reply = "L0"
[[L0]]
constrained = false
when = "^tell"
reply = "Once upon a time, there was a prefix cache that always hit."
""" + SUMMARY
    deltas = []

    def on_event(event):
        if event.type == "text_delta":
            deltas.append(event.text)

    async with ScriptedEngine.serve(script) as engine, session(hcp, engine) as h:
        h.observers.append(on_event)
        result = await h.turn("tell me a story", stream=True)
    assert len(deltas) > 1 and "".join(deltas) == result.answer
    assert result.answer == "Once upon a time, there was a prefix cache that always hit."
    assert bodies(engine, "L0")[1]["stream"] is True
    assert result.usage["prompt_tokens"] > 0


async def test_streamed_client_tool_calls_keep_their_ids_through_the_round_trip(hcp):
    client_tool = {"type": "function", "function": {
        "name": "get_location", "description": "The user's location.",
        "parameters": {"type": "object", "properties": {"precise": {"type": "boolean"}}}}}
    script = """
[[L0]]
constrained = true
reply = "L1"
[[L1]]
tool_calls = [{ name = "echo", arguments = { text = "server side" } }, { name = "get_location", arguments = { precise = true } }]
[[L1]]
when = "Lisbon"
reply = "You are in Lisbon."
""" + SUMMARY
    fragments = []

    def on_event(event):
        if event.type == "tool_call_delta":
            fragments.append(event)

    async with ScriptedEngine.serve(script) as engine, session(hcp, engine) as h:
        h.observers.append(on_event)
        first = await h.turn("where am I?", client_tools=[client_tool], stream=True)
        [call] = first.client_calls
        # Only the client's call streams, as index 0 of the client's calls, id and name once.
        assert {f.index for f in fragments} == {0}
        assert fragments[0].call_id == call["id"] and fragments[0].name == "get_location"
        assert all(f.call_id is None for f in fragments[1:])
        assert json.loads("".join(f.arguments for f in fragments)) == {"precise": True}
        second = await h.submit_tool_results({call["id"]: "Lisbon"}, stream=True)
    assert second.answer == "You are in Lisbon."
    sent = bodies(engine, "L1")[1]["messages"]
    assert [m.get("tool_call_id") for m in sent[-2:]] == [sent[-3]["tool_calls"][0]["id"],
                                                          call["id"]]


class Nap:
    """A plugin whose tool waits, to show that one reply's calls run at the same time: it
    notes when each call started and ended."""

    from mol.plugins import hookimpl

    def __init__(self) -> None:
        self.started: list[float] = []
        self.ended: list[float] = []

    @hookimpl
    def mol_register_tools(self, register):
        import time

        import anyio

        async def nap(seconds: float) -> str:
            """Wait a while."""
            self.started.append(time.monotonic())
            await anyio.sleep(seconds)
            self.ended.append(time.monotonic())
            return f"slept {seconds}"

        register(nap)


async def test_parallel_tool_calls_run_concurrently_and_keep_their_order(tmp_path):
    from .conftest import toy_plugins, write_hcp

    write_hcp(tmp_path)
    path = tmp_path / "test.toml"
    path.write_text(path.read_text().replace('tools.allow = ["echo", "add", "secret", "fail"]',
                                             'tools.allow = ["echo", "add", "nap"]'))
    from mol.hcp.loader import load

    artifact = load(path)
    nap = '{{ name = "nap", arguments = {{ seconds = {} }} }}'
    calls = ", ".join(nap.format(s) for s in (0.4, 0.1, 0.4))
    script = f"""
[[L0]]
constrained = true
reply = "L2"
[[L2]]
tool_calls = [{calls}]
[[L2]]
reply = "rested"
""" + SUMMARY
    naps = Nap()
    async with ScriptedEngine.serve(script) as engine, session(
            artifact, engine, plugins=toy_plugins(("nap", naps))) as h:
        result = await h.turn("rest")
    assert result.answer == "rested"
    # Concurrent: every call started before any ended (in turn, the first would end first).
    assert len(naps.started) == 3 and max(naps.started) < min(naps.ended)
    results = bodies(engine, "L2")[-1]["messages"][-3:]  # the request after the naps
    assert [m["content"] for m in results] == ["slept 0.4", "slept 0.1", "slept 0.4"]


async def test_resuming_with_client_tool_results_keeps_the_summaries_queued_for_it(hcp):
    client_tool = LOCATION
    script = """
[[L0]]
constrained = true
times = 2
reply = "L1"
[[L1]]
tool_calls = [{ name = "get_location", arguments = {} }]
[[L1]]
when = "Lisbon"
reply = "You are in Lisbon."
[[L1]]
when = "and now"
reply = "Still Lisbon."
""" + SUMMARY
    async with ScriptedEngine.serve(script) as engine, session(hcp, engine) as h:
        first = await h.turn("where am I?", client_tools=[client_tool])
        [call] = first.client_calls
        # Another adapter's turn finished while L1 waited: its summary is queued for L1.
        h.conversation.share_summary("L2", "[L2] fixed the build", ["L1"], "fix the build")
        queued = list(h.conversation.pending["L1"])
        await h.submit_tool_results({call["id"]: "Lisbon"}, client_tools=[client_tool])
        assert h.conversation.pending["L1"] == queued
        await h.turn("and now?")
    last = bodies(engine, "L1")[-1]["messages"]
    assert last[-2]["role"] == "user" and "- [L2] fixed the build" in last[-2]["content"]
    assert last[-1] == {"role": "user", "content": "and now?"}
    assert h.conversation.pending["L1"] == []
