"""Responses bodies as real clients send them: ``namespace`` tools (flattened, their calls
returned with the namespace), hosted tools mol cannot run (left out, named in
``metadata``), ``developer`` messages, ``input_text`` parts, ``function_call_output`` as
content parts; ``conversation`` refused with a clear 400."""

from __future__ import annotations

import httpx
import pytest

from mol.runtime.testing import ScriptedEngine

from .conftest import serve_app, transcript_problems

SCRIPT = """
[[L0]]
constrained = true
times = -1
reply = "L1"
[[L0]]
constrained = false
times = -1
reply = "summary"

[[L1]]
when = "^spawned: ok$"
times = -1
reply = "The helper is running."
[[L1]]
when = "spawn"
times = -1
tool_calls = [{ name = "spawn_agent", arguments = { task = "count" } }]
[[L1]]
times = -1
reply = "Plain answer."
"""

PARAMS = {"type": "object", "properties": {"task": {"type": "string"}}}
TOOLS = [
    {"type": "function", "name": "exec_command", "parameters": PARAMS},
    {"type": "namespace", "name": "multi_agent", "description": "Helpers.", "tools": [
        {"type": "function", "name": "spawn_agent", "description": "Start one.",
         "parameters": PARAMS},
        {"type": "function", "name": "exec_command", "parameters": PARAMS}]},
    {"type": "web_search"},
    {"type": "image_generation"},
]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("inputs")
    with ScriptedEngine.serve(SCRIPT) as engine, serve_app(tmp, engine.base_url) as server:
        server.engine = engine
        yield server


def post(served, body: dict) -> httpx.Response:
    return httpx.post(served.url + "/responses", json={"model": "mol", **body}, timeout=60,
                      headers={"Authorization": f"Bearer {served.key}"})


def test_namespace_and_hosted_tools_and_content_parts(served):
    asked = post(served, {"tools": TOOLS, "input": [
        {"role": "developer", "content": "Answer tersely."},
        {"role": "user", "content": [{"type": "input_text", "text": "please spawn "},
                                     {"type": "input_text", "text": "a helper"}]}]})
    assert asked.status_code == 200, asked.text
    [call] = asked.json()["output"]
    assert (call["type"], call["name"], call["namespace"]) == (
        "function_call", "spawn_agent", "multi_agent")
    assert asked.json()["metadata"]["mol_tools_left_out"] == "web_search, image_generation"
    sent = served.engine.requests_for("L1")[-1]["body"]
    shown = {t["function"]["name"]: t["function"] for t in sent["tools"]}
    # The clashing name is qualified; the hosted tools are not shown to the model.
    assert set(shown) == {"shout", "exec_command", "spawn_agent", "multi_agent__exec_command"}
    assert shown["spawn_agent"]["description"] == "Start one. (multi_agent: Helpers.)"
    assert sent["messages"][-1] == {"role": "user", "content": "please spawn a helper"}
    assert {"role": "system", "content": "Answer tersely."} in sent["messages"]

    answered = post(served, {"tools": TOOLS, "previous_response_id": asked.json()["id"],
                             "input": [{"type": "function_call_output",
                                        "call_id": call["call_id"], "output": [
                                            {"type": "input_text", "text": "spawned: "},
                                            {"type": "input_text", "text": "ok"}]}]})
    assert answered.status_code == 200, answered.text
    assert answered.json()["output"][0]["content"][0]["text"] == "The helper is running."
    last = served.engine.requests_for("L1")[-1]["body"]["messages"]
    assert last[-2]["tool_calls"][0]["function"]["name"] == "spawn_agent"
    assert last[-1] == {"role": "tool", "tool_call_id": call["call_id"],
                        "content": "spawned: ok"}
    assert transcript_problems(served.engine.requests) == []


@pytest.mark.parametrize(("body", "param", "needle"), [
    ({"input": "hi", "conversation": "conv_1"}, "conversation", "not supported"),
    ({"input": "hi", "tools": [{"type": "namespace", "name": "x"}]}, "tools[0].tools",
     "missing required field"),
    ({"input": "hi", "tools": [{"type": "function", "name": "a"},
                               {"type": "function", "name": "n__a"},
                               {"type": "namespace", "name": "n", "tools": [
                                   {"type": "function", "name": "a"}]}]},
     "tools[2].tools[0].name", "clashes"),
    ({"input": [{"type": "function_call_output", "call_id": "call_L1_x", "output": 5}]},
     "input[0].output", "a string or an array of content parts"),
    ({"input": [{"type": "telepathy"}]}, "input[0].type", "not supported"),
])
def test_bad_inputs_name_the_field(served, body, param, needle):
    answer = post(served, body)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["param"] == param and needle in error["message"], error
