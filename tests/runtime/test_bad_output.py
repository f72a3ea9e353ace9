"""Bad model output and engine failures, each handled as documented."""

import time

import pytest

from mol.core.errors import EngineResponseError, EngineTimeout
from mol.runtime.testing import ScriptedEngine

from .conftest import bodies, session, write_hcp

pytestmark = pytest.mark.anyio

ROUTE = '[[L0]]\nconstrained = true\nreply = "L2"\n'
SUMMARY = '[[L0]]\nconstrained = false\ntimes = -1\nreply = "summary"\n'


async def tool_result_for(hcp, call: str) -> str:
    script = ROUTE + f"[[L2]]\ntool_calls = [{call}]\n[[L2]]\nreply = 'ok'\n" + SUMMARY
    async with ScriptedEngine.serve(script) as engine, session(hcp, engine) as h:
        result = await h.turn("go")
    assert result.answer == "ok"
    returned = [e for e in result.events if e.type == "tool_result"]
    assert len(returned) == 1 and returned[0].is_error
    assert bodies(engine, "L2")[1]["messages"][-1]["content"] == returned[0].content
    return returned[0].content


async def test_unknown_tool_name(hcp):
    content = await tool_result_for(hcp, '{ name = "teleport", arguments = {} }')
    assert "unknown tool 'teleport'" in content and "Available tools: add, echo" in content


async def test_invalid_json_arguments(hcp):
    content = await tool_result_for(hcp, '{ name = "echo", arguments = "{\\"text\\": " }')
    assert "arguments are not valid JSON" in content


async def test_schema_violation(hcp):
    content = await tool_result_for(hcp, '{ name = "add", arguments = { a = "two" } }')
    assert content.startswith("Error: invalid arguments: a:")


async def test_missing_and_extra_arguments(hcp):
    content = await tool_result_for(hcp, '{ name = "add", arguments = { b = 1, c = 2 } }')
    assert "a: Field required" in content and "c: unknown argument" in content


async def test_tool_exception_becomes_text_without_traceback(hcp):
    content = await tool_result_for(hcp, '{ name = "fail", arguments = { reason = "disk on fire" } }')
    assert content == "Error: fail failed: disk on fire"


async def test_empty_reply_is_an_empty_answer(hcp):
    script = ROUTE + '[[L2]]\nreply = ""\n' + SUMMARY
    async with ScriptedEngine.serve(script) as engine, session(hcp, engine) as h:
        result = await h.turn("go")
    assert result.status == "complete" and result.answer == ""
    assert h.conversation.view("L2")[-1] == {"role": "assistant", "content": ""}


async def test_engine_500_fails_the_turn_with_an_engine_error(tmp_path):
    artifact = write_hcp(tmp_path)
    script = ROUTE + '[[L2]]\nerror = { status = 500, message = "gpu fell off" }\n'
    async with ScriptedEngine.serve(script) as engine, session(artifact, engine) as h:
        with pytest.raises(EngineResponseError, match="gpu fell off") as info:
            await h.turn("go")
    assert info.value.status == 500
    assert h.conversation.view("L2") == [] and h.conversation.turns[0].status == "interrupted"


async def test_engine_500_is_retried_within_the_bound(tmp_path):
    from mol.hcp.loader import load

    write_hcp(tmp_path)
    path = tmp_path / "test.toml"
    path.write_text(path.read_text().replace("max_retries = 0", "max_retries = 2"))
    script = ROUTE + ('[[L2]]\ntimes = 2\nerror = { status = 503, message = "busy" }\n'
                      '[[L2]]\nreply = "third time lucky"\n') + SUMMARY
    async with ScriptedEngine.serve(script) as engine, session(load(path), engine) as h:
        result = await h.turn("go")
    assert result.answer == "third time lucky"
    assert len(engine.requests_for("L2")) == 3


async def test_engine_timeout(tmp_path):
    artifact = write_hcp(tmp_path, timeout=1)
    script = ROUTE + '[[L2]]\ndelay = 20\nreply = "late"\n'
    async with ScriptedEngine.serve(script) as engine, session(artifact, engine) as h:
        started = time.monotonic()
        with pytest.raises(EngineTimeout):
            await h.turn("go")
    assert time.monotonic() - started < 8


async def test_nothing_listening_is_a_connection_error(tmp_path):
    from mol.core.errors import EngineConnectionError
    from mol.runtime import Runtime

    from .conftest import toy_plugins

    artifact = write_hcp(tmp_path)
    runtime = Runtime(artifact, engine_url="http://127.0.0.1:9/v1", plugins=toy_plugins())
    async with runtime.session() as h:
        with pytest.raises(EngineConnectionError, match="hosted_vllm/L0"):
            await h.turn("hello")


@pytest.mark.parametrize("limit, stopped, note", [
    ("max_steps = 2", "max_steps", "stopped after 2 steps"),
    ("max_turn_tokens = 50", "token_budget", "budget of 50 tokens"),
])
async def test_a_looping_model_is_stopped_with_the_view_consistent(tmp_path, limit, stopped,
                                                                   note):
    write_hcp(tmp_path)
    path = tmp_path / "test.toml"
    path.write_text(path.read_text().replace('tools.deny = ["secret"]\n',
                                             f'tools.deny = ["secret"]\n{limit}\n'))
    from mol.hcp.loader import load

    script = ROUTE + ('[[L2]]\ntimes = -1\nusage = { prompt_tokens = 40, completion_tokens = 5 }\n'
                      'tool_calls = [{ name = "echo", arguments = { text = "again" } }]\n'
                      + SUMMARY)
    async with ScriptedEngine.serve(script) as engine, session(load(path), engine) as h:
        result = await h.turn("loop forever")
    assert result.stopped == stopped and note in result.answer
    view = h.conversation.view("L2")
    assert view[-1]["role"] == "tool"  # every call has its result
    calls = [m for m in view if m.get("tool_calls")]
    assert len(calls) == len([m for m in view if m["role"] == "tool"])
    # two steps: 2 = max_steps, and 2 x 45 tokens passes the 50-token budget
    assert len(engine.requests_for("L2")) == 2
