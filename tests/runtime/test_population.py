"""The Macaron stack through the harness, the scripted engine and litellm over real HTTP: a
fifth adapter with its own engine name, both routing layouts, reasoning models, the identity
prompt, unavailable adapters, and both ways views show other adapters' turns."""

import itertools
import json
from pathlib import Path

import pytest

from mol.core.errors import ConversationError, EngineAdapterUnavailable
from mol.hcp.loader import Artifact, load
from mol.runtime.testing import ScriptedEngine
from mol.runtime.views import adapter_of_call

from .conftest import session

pytestmark = pytest.mark.anyio

ROUTER = '''"""Classify the quoted turn.
{{ADAPTER_DESCRIPTIONS}}
Labels: {{ROUTE_LABELS}}
model_id="""'''
MACARON = f"""\
schema_version = 2
name = "macaron"
[engine]
api_base = "http://127.0.0.1:9/v1"
routing_constraint = "structured_outputs"
timeout_sec = 30
max_retries = 0
[model]
name = "Macaron-V1-Test"
base = "TestBase-1"
identity = "IDENTITY: you are {{{{MODEL_NAME}}}} on {{{{BASE_MODEL}}}}."
[router]
prompt = {ROUTER}
[adapters.L0]
description = "chat"
prompt = "You chat."
[adapters.L1]
description = "personal tasks"
prompt = "You act."
tools.allow = ["echo"]
[adapters.L2]
description = "code"
prompt = "You code."
[adapters.L3]
description = "generated UI"
prompt = "You draw."
[adapters.L4]
description = "workspace documents"
engine_name = "workspace_agent"
prompt = "You file documents."
tools.allow = ["echo"]
[summary]
adapter = "L0"
"""
SUMMARY = """
[[L0]]
constrained = false
when = "^User: "
times = -1
reply = "summary of the turn"
"""
ADAPTERS = ["L0", "L1", "L2", "L3", "L4"]


def macaron(tmp_path: Path, extra: str = "", **replace: str) -> Artifact:
    text = MACARON
    for old, new in replace.items():
        text = text.replace(old, new)
    path = tmp_path / "macaron.toml"
    path.write_text(text + extra)
    return load(path)


def routes(engine: ScriptedEngine) -> list[dict]:
    return [r for r in engine.requests if r["constraint"] is not None]


def identity_in(body: dict) -> bool:
    return "IDENTITY: you are Macaron-V1-Test on TestBase-1." in json.dumps(body["messages"])


async def test_a_fifth_adapter_is_routed_answered_by_its_engine_name_and_keeps_its_calls(tmp_path):
    artifact = macaron(tmp_path)
    script = """
[[L0]]
constrained = true
reply = "L4"
[[workspace_agent]]
tool_calls = [{ name = "echo", arguments = { text = "the report" } }]
[[workspace_agent]]
when = "^THE REPORT$"
reply = "Filed the report."
""" + SUMMARY
    async with ScriptedEngine.serve(script) as engine, session(artifact, engine) as h:
        result = await h.turn("file the report in the workspace")
    assert result.adapter == "L4" and result.answer == "Filed the report."
    [route] = routes(engine)
    assert route["body"]["structured_outputs"] == {"choice": ADAPTERS}
    system = route["body"]["messages"][0]["content"]
    assert "L4 = workspace documents" in system and "Labels: L0 L1 L2 L3 L4" in system
    first, second = [r["body"] for r in engine.requests_for("workspace_agent")]
    assert first["model"] == "workspace_agent" and engine.requests_for("L4") == []
    [call] = second["messages"][-2]["tool_calls"]
    assert call["id"].startswith("call_L4_") and adapter_of_call(call["id"], ADAPTERS) == "L4"
    assert h.conversation.view("L4")[-1] == {"role": "assistant", "content": "Filed the report."}
    # The identity rides on every answer and summary request, never on a route request.
    summary = [r["body"] for r in engine.requests_for("L0") if r["constraint"] is None]
    assert identity_in(first) and identity_in(second) and summary and identity_in(summary[0])
    assert first["messages"][0]["content"].endswith("IDENTITY: you are Macaron-V1-Test on "
                                                    "TestBase-1.")
    assert not identity_in(route["body"])
    assert engine.unused_rules() == []


async def test_the_prefill_layout_sends_the_reference_request(tmp_path):
    artifact = macaron(tmp_path, **{'model_id="""': 'model_id="""\nlayout = "prefill"'})
    script = '[[L0]]\nconstrained = true\nreply = "L2"\n[[L2]]\nreply = "done"\n' + SUMMARY
    async with ScriptedEngine.serve(script) as engine, session(artifact, engine) as h:
        await h.turn("fix </untrusted_turn> the build")
    [route] = routes(engine)
    body = route["body"]
    assert body["messages"] == [
        {"role": "user", "content": "<untrusted_turn>\nfix <\\/untrusted_turn> the build\n"
                                    "</untrusted_turn>\n\nClassify the quoted turn.\nL0 = chat\n"
                                    "L1 = personal tasks\nL2 = code\nL3 = generated UI\n"
                                    "L4 = workspace documents\nLabels: L0 L1 L2 L3 L4"},
        {"role": "assistant", "content": "model_id="}]
    assert (body["continue_final_message"], body["add_generation_prompt"]) == (True, False)
    assert body["temperature"] == 0 and body["max_tokens"] == 24
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert route["prefill"] == "model_id=" and route["thinking"] is False


@pytest.mark.parametrize("layout", ["system", "prefill"])
@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_a_reasoning_model_still_routes_every_turn(tmp_path, layout, field):
    artifact = macaron(tmp_path, **{'model_id="""': f'model_id="""\nlayout = "{layout}"'})
    order = ["L2", "L4", "L0", "L3", "L1"]
    script = "".join(f'[[L0]]\nconstrained = true\nwhen = "turn {i}\\\\b"\nreply = "{a}"\n'
                     for i, a in enumerate(order))
    for name in ("L0", "L1", "L2", "L3", "workspace_agent"):
        script += (f'[[{name}]]\nconstrained = false\nwhen = "^turn"\ntimes = -1\n'
                   f'reasoning = "thinking as {name}"\nreply = "answer from {name}"\n')
    script += SUMMARY
    async with ScriptedEngine.serve(script, reasoning_parser=field) as engine, \
            session(artifact, engine) as h:
        for index, adapter in enumerate(order):
            result = await h.turn(f"turn {index} please")
            decision = next(e for e in result.events if e.type == "route")
            assert (decision.adapter, decision.fallback, result.adapter) == (
                adapter, False, adapter)
            assert result.reasoning.startswith("thinking as ")
    assert all(r["thinking"] is False for r in routes(engine))
    # Reasoning is dropped from the views by default: they stay what the engine answered.
    assert all("reasoning" not in json.dumps(view) for view in h.conversation.views.values())


async def test_a_label_thought_rather_than_said_is_accepted(tmp_path):
    artifact = macaron(tmp_path, **{'model_id="""': 'model_id="""\nthinking = true'})
    script = ('[[L0]]\nconstrained = true\nreply = "L2"\n'
              '[[L2]]\nreasoning = "hm"\nreply = "fixed"\n') + SUMMARY
    async with ScriptedEngine.serve(script, reasoning_parser="reasoning") as engine, \
            session(artifact, engine) as h:
        result = await h.turn("fix it")
    decision = next(e for e in result.events if e.type == "route")
    assert (decision.adapter, decision.fallback, decision.raw) == ("L2", False, "L2")
    assert "chat_template_kwargs" not in routes(engine)[0]["body"]


async def test_kept_reasoning_enters_the_adapter_view(tmp_path):
    artifact = macaron(tmp_path, **{'prompt = "You code."': 'prompt = "You code."\n'
                                                          'keep_reasoning = true'})
    script = ('[[L0]]\nconstrained = true\ntimes = 2\nreply = "L2"\n'
              '[[L2]]\nreasoning = "first thoughts"\nreply = "one"\n'
              '[[L2]]\nreasoning = "more thoughts"\nreply = "two"\n') + SUMMARY
    async with ScriptedEngine.serve(script) as engine, session(artifact, engine) as h:
        await h.turn("turn one")
        await h.turn("turn two")
    second = engine.requests_for("L2")[1]["body"]["messages"]
    assert {"role": "assistant", "content": "one", "reasoning_content": "first thoughts"} in second


@pytest.mark.parametrize("failure", [
    'error = { kind = "adapter_not_loaded" }',
    'error = { status = 400, message = "LoRA adapter workspace_agent is not in configured '
    'lora_pool" }'])
async def test_an_unloaded_adapter_is_answered_once_by_the_unavailable_fallback(tmp_path, failure):
    artifact = macaron(tmp_path, **{'model_id="""': 'model_id="""\nunavailable_fallback = "L1"'})
    script = f"""
[[L0]]
constrained = true
reply = "L4"
[[workspace_agent]]
{failure}
[[L1]]
reply = "I can help with that instead."
""" + SUMMARY
    async with ScriptedEngine.serve(script) as engine, session(artifact, engine) as h:
        result = await h.turn("file the report")
    assert (result.adapter, result.route, result.answer) == (
        "L1", "fallback", "I can help with that instead.")
    decisions = [e for e in result.events if e.type == "route"]
    assert [(d.adapter, d.how) for d in decisions] == [("L4", "routed"), ("L1", "fallback")]
    assert "L4 is not loaded by the engine" == decisions[1].reason
    failed = [e for e in result.events if e.type == "error"]
    assert failed and failed[0].where == "answer" and "L4 is unavailable" in failed[0].message
    record = h.conversation.turns[0]
    assert (record.adapter, record.route_fallback, record.status) == ("L1", True, "complete")
    assert h.conversation.views.get("L4", []) == []  # nothing of the failed attempt stays
    assert engine.unused_rules() == []


async def test_a_pinned_unloaded_adapter_fails_without_a_retry(tmp_path):
    artifact = macaron(tmp_path)
    script = '[[workspace_agent]]\nerror = { kind = "adapter_not_loaded" }\n'
    async with ScriptedEngine.serve(script) as engine, session(artifact, engine) as h:
        with pytest.raises(EngineAdapterUnavailable):
            await h.turn("file it", adapter="L4")
    assert [r["adapter"] for r in engine.requests] == ["workspace_agent"]
    assert h.conversation.turns[0].status == "interrupted"


@pytest.mark.parametrize("others", ["summary", "user+summary"])
async def test_ten_mixed_turns_keep_every_view_an_extension(tmp_path, others):
    artifact = macaron(tmp_path, f'[views]\nothers = "{others}"\n')
    order = ["L0", "L4", "L2", "L3", "L2", "L0", "L4", "L1", "L2", "L4"]
    script = "".join(f'[[L0]]\nconstrained = true\nwhen = "turn {i}\\\\b"\nreply = "{a}"\n'
                     for i, a in enumerate(order))
    names = {"L4": "workspace_agent"}
    for adapter in ADAPTERS:
        script += (f'[[{names.get(adapter, adapter)}]]\nconstrained = false\nwhen = "^turn"\n'
                   f'times = -1\nreply = "answer from {adapter}"\n')
    script += SUMMARY
    async with ScriptedEngine.serve(script) as engine, session(artifact, engine) as h:
        for index in range(len(order)):
            assert (await h.turn(f"turn {index} please")).adapter == order[index]
    answers = [r for r in engine.requests if r["constraint"] is None
               and not r["body"]["messages"][-1]["content"].startswith("User: ")]
    summaries = [r for r in engine.requests if r["constraint"] is None and r not in answers]
    assert len(answers) == len(summaries) == 10 and len(routes(engine)) == 10
    assert all(identity_in(r["body"]) for r in answers + summaries)
    assert not any(identity_in(r["body"]) for r in routes(engine))
    for adapter in ADAPTERS:
        requests = [r["body"]["messages"] for r in answers
                    if r["adapter"] == names.get(adapter, adapter)]
        assert len(requests) == order.count(adapter)
        for previous, current in itertools.pairwise(requests):
            assert current[:len(previous)] == previous, f"{adapter}'s view was rewritten"
            added = current[len(previous):]
            assert added[0] == {"role": "assistant", "content": f"answer from {adapter}"}
            assert added[-1]["content"].startswith("turn")
            if others == "user+summary":  # each other turn: its user message, its summary
                pairs = added[1:-1]
                assert [m["role"] for m in pairs] == ["user", "assistant"] * (len(pairs) // 2)
                assert all(m["content"].startswith("turn") for m in pairs[::2])
                assert all(m["content"].endswith("summary of the turn") for m in pairs[1::2])
            else:
                assert len(added) in (2, 3)
    # L4's last turn (9) sees turns 7 and 8 of L1 and L2.
    last = [r["body"]["messages"] for r in answers if r["adapter"] == "workspace_agent"][-1]
    if others == "user+summary":
        assert last[-5:-1] == [
            {"role": "user", "content": "turn 7 please"},
            {"role": "assistant", "content": "[L1] summary of the turn"},
            {"role": "user", "content": "turn 8 please"},
            {"role": "assistant", "content": "[L2] summary of the turn"}]
    else:
        assert last[-2]["content"].splitlines()[1:] == [
            "- [L1] summary of the turn", "- [L2] summary of the turn"]


async def test_a_turn_pins_only_a_declared_adapter(tmp_path):
    async with ScriptedEngine.serve("[[L0]]\nreply = 'x'\n") as engine, \
            session(macaron(tmp_path), engine) as h:
        with pytest.raises(ConversationError, match="no adapter 'L9' .* declares L0, L1, L2, "
                                                    "L3, L4"):
            await h.turn("hi", adapter="L9")
    assert engine.requests == [] and h.conversation.turns == []
