"""Hop 3 over the scripted engine: who writes the summary, what it reads, skipped adapters,
thinking off, and the identity prompt."""

import pytest

from mol.runtime.summary import SUMMARY_INPUT_LIMIT, trace
from mol.runtime.testing import ScriptedEngine

from .conftest import session, write_hcp

pytestmark = pytest.mark.anyio

ROUTE_L2 = '[[L0]]\nconstrained = true\nreply = "L2"\n'
TOOLS_THEN_ANSWER = """
[[L2]]
tool_calls = [{ name = "echo", arguments = { text = "ping" } }]
[[L2]]
when = "^PING$"
reply = "echo said PING"
"""


async def test_the_answering_adapter_summarizes_its_own_trace(tmp_path):
    extra = ('[summary]\nadapter = "answering"\ninput = "trace"\nprompt = "Summarize that."\n'
             '[model]\nidentity = "I am the test model."\n')
    artifact = write_hcp(tmp_path, extra=extra)
    script = ROUTE_L2 + TOOLS_THEN_ANSWER + (
        '[[L2]]\nwhen = "^Summarize that.$"\nreply = "Echoed ping."\n')
    async with ScriptedEngine.serve(script) as engine, session(artifact, engine) as h:
        result = await h.turn("run echo")
    assert result.answer == "echo said PING"
    assert h.conversation.turns[0].summary == "[L2] Echoed ping."
    *_, summary = engine.requests_for("L2")
    messages = summary["body"]["messages"]
    call = messages[2]["tool_calls"][0]
    assert messages == [
        {"role": "system", "content": "I am the test model."},
        {"role": "user", "content": "run echo"},
        {"role": "assistant", "tool_calls": [call]},  # litellm leaves out the null content
        {"role": "tool", "tool_call_id": call["id"], "content": "PING"},
        {"role": "assistant", "content": "echo said PING"},
        {"role": "user", "content": "Summarize that."}]
    assert summary["body"]["chat_template_kwargs"] == {"enable_thinking": False}
    assert summary["body"]["max_tokens"] == 128 and "tools" not in summary["body"]
    assert engine.requests_for("L0")[0]["constraint"] is not None  # L0 only routed
    assert engine.unused_rules() == []


def test_a_trace_keeps_whole_steps_and_cuts_long_contents():
    view = [{"role": "system", "content": "You code."}, {"role": "user", "content": "earlier"},
            {"role": "assistant", "content": "old answer"}, {"role": "user", "content": "go"}]
    for step in range(20):
        view += [{"role": "assistant", "content": None,
                  "tool_calls": [{"id": f"call_L2_{step}", "type": "function",
                                  "function": {"name": "t", "arguments": "{}"}}]},
                 {"role": "tool", "tool_call_id": f"call_L2_{step}", "content": "x" * 5000}]
    view.append({"role": "assistant", "content": "done", "reasoning_content": "hmm"})
    out = trace(view)
    assert out[0] == {"role": "user", "content": "go"}
    ids = [m["tool_call_id"] for m in out if m["role"] == "tool"]
    assert ids == [f"call_L2_{i}" for i in (0, 1, 2, 3, 13, 14, 15, 16, 17, 18, 19)]
    calls = [m["tool_calls"][0]["id"] for m in out if m.get("tool_calls")]
    assert calls == ids  # every call kept has its result, and the other way round
    assert out[-1] == {"role": "assistant", "content": "done"}
    assert all(len(m["content"] or "") < 5000 for m in out)
    assert sum(len(m["content"] or "") for m in out) < 2 * SUMMARY_INPUT_LIMIT


async def test_skipped_adapters_get_no_summary_hop(tmp_path):
    artifact = write_hcp(tmp_path, extra='[summary]\nskip = ["L2"]\n')
    script = ROUTE_L2 + '[[L2]]\nreply = "fixed"\n'
    async with ScriptedEngine.serve(script) as engine, session(artifact, engine) as h:
        await h.turn("fix it")
    assert [r["adapter"] for r in engine.requests] == ["L0", "L2"]
    assert h.conversation.turns[0].summary == "L2 handled: fix it -> fixed"
    assert h.conversation.pending["L0"][0]["summary"] == "L2 handled: fix it -> fixed"


async def test_thinking_on_the_summary_hop_when_asked_and_thoughts_as_the_last_resort(tmp_path):
    artifact = write_hcp(tmp_path, extra="[summary]\nthinking = true\n")
    script = ROUTE_L2 + '[[L2]]\nreasoning = "look"\nreply = "fixed"\n' + (
        '[[L0]]\nconstrained = false\nwhen = "^User: "\nreply = "it was fixed"\n')
    async with ScriptedEngine.serve(script, reasoning_parser="reasoning_content") as engine, \
            session(artifact, engine) as h:
        await h.turn("fix it")
    summary = engine.requests_for("L0")[-1]
    assert summary["thinking"] is True and "chat_template_kwargs" not in summary["body"]
    # The thinking model put everything in its reasoning: that is the record.
    assert h.conversation.turns[0].summary == "[L2] it was fixed"
