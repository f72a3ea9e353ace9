"""``mol serve`` in front of a Macaron-V1 stack, through the official openai client over real
HTTP: one public model name, hidden adapters, a fifth adapter pinned through client tool calls,
reasoning, client parameters, cached tokens, the adapter and route reaching the client, and
each engine fault's outcome."""

from __future__ import annotations

import json
import logging

import openai
import pytest

from mol.runtime.testing import ScriptedEngine

from .conftest import sdk_stream_event, serve_app

PUBLIC = "Macaron-V1-Venti"
MACARON = """\
schema_version = 2
name = "venti-test"
[engine]
api_base = "http://127.0.0.1:9/v1"
routing_constraint = "structured_outputs"
timeout_sec = 30
max_retries = 0
[model]
name = "Macaron-V1-Venti"
base = "GLM-5.2"
identity = "You are {{{{MODEL_NAME}}}}."
[router]
prompt = "Route to one of {{{{ROUTE_LABELS}}}}."
[adapters.L0]
prompt = "You chat."
[adapters.L2]
prompt = "You code."
params = {{ temperature = 0.2, max_tokens = 100 }}
tools.allow = ["shout"]
[adapters.L4]
engine_name = "workspace_agent"
prompt = "You file documents."
[summary]
adapter = "L0"
[session]
store = "sqlite:///{store}"
"""
SCRIPT = """
[[L0]]
constrained = true
when = "report"
times = -1
reply = "L4"
[[L0]]
constrained = true
when = "tune|long|malformed|undeclared|boom"
times = -1
reply = "L2"
[[L0]]
constrained = true
times = -1
reply = "L0"
[[L0]]
constrained = false
when = "^User: "
times = -1
reply = "summary"
[[L0]]
constrained = false
when = "hello"
times = -1
reasoning = "The user greets me."
reply = "Hello from Venti."

[[workspace_agent]]
when = "file the report"
times = -1
reasoning = "I need the file list."
tool_calls = [{ name = "list_files", arguments = {} }]
[[workspace_agent]]
when = "^report.md"
times = -1
reasoning = "Found it."
reply = "Filed report.md."

[[L2]]
when = "tune"
times = -1
reasoning = "Tuning."
reply = "tuned"
[[L2]]
when = "long"
times = -1
error = { kind = "context_length", limit = 64 }
[[L2]]
when = "malformed"
times = -1
tool_calls = [{ name = "shout", arguments = "{not json" }]
[[L2]]
when = "undeclared"
times = -1
tool_calls = [{ name = "no_such_tool", arguments = {} }]
[[L2]]
when = "^Error: "
times = -1
reasoning = "That call failed."
reply = "recovered from the tool error"
[[L2]]
when = "boom"
times = -1
error = { status = 500, message = "CUDA out of memory in /opt/vllm/worker.py" }
"""
LIST_FILES = {"type": "function", "function": {
    "name": "list_files", "description": "The files of the workspace.",
    "parameters": {"type": "object", "properties": {}}}}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("macaron")
    with ScriptedEngine.serve(SCRIPT, reasoning_parser="reasoning_content") as engine, \
            serve_app(tmp, engine.base_url, hcp=MACARON) as server:
        server.engine = engine
        yield server


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def answer_requests(engine, adapter: str, since: int = 0) -> list[dict]:
    return [r["body"] for r in engine.requests[since:] if r["adapter"] == adapter
            and r["constraint"] is None
            and not r["body"]["messages"][-1]["content"].startswith("User: ")]


def test_only_the_public_model_is_served(served):
    client = served.client()
    assert [m.id for m in client.models.list()] == [PUBLIC]
    assert client.models.retrieve(PUBLIC).id == PUBLIC
    for name in ("L2", "gpt-4"):
        with pytest.raises(openai.NotFoundError) as caught:
            client.models.retrieve(name)
        assert caught.value.body["code"] == "model_not_found"
        with pytest.raises(openai.NotFoundError) as caught:
            client.chat.completions.create(model=name, messages=user("hello"))
        assert caught.value.body["code"] == "model_not_found"
        assert caught.value.body["param"] == "model" and PUBLIC in caught.value.body["message"]


def test_chat_reports_the_adapter_the_route_the_reasoning_and_cached_tokens(served):
    client, engine = served.client(), served.engine
    for turn in range(2):
        before = len(engine.requests)
        raw = client.chat.completions.with_raw_response.create(
            model=PUBLIC, messages=user(f"hello number {turn}"))
        reply = raw.parse()
        assert (raw.headers["x-mol-adapter"], raw.headers["x-mol-route"]) == ("L0", "routed")
        assert reply.model == PUBLIC
        assert reply.metadata == {"mol_adapter": "L0", "mol_route": "routed"}
        message = reply.choices[0].message
        assert message.content == "Hello from Venti."
        assert message.model_extra["reasoning_content"] == "The user greets me."
        # The engine's cached prompt tokens of this turn's route and answer calls.
        hops = [r for r in engine.requests[before:] if "hello" in json.dumps(r["body"])
                and not r["body"]["messages"][-1]["content"].startswith("User: ")]
        assert len(hops) == 2  # the summary hop runs after the reply
        cached = sum(r["usage"]["prompt_tokens_details"]["cached_tokens"] for r in hops)
        assert reply.usage.prompt_tokens_details.cached_tokens == cached
    assert cached > 0  # the second turn's route request repeats the router prompt


def test_chat_streams_reasoning_then_the_answer_with_the_headers(served):
    raw = served.client().chat.completions.with_raw_response.create(
        model=PUBLIC, messages=user("hello, stream it"), stream=True,
        stream_options={"include_usage": True})
    assert raw.headers["x-mol-adapter"] == "L0"
    chunks = list(raw.parse())
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    thought = "".join(d.model_extra.get("reasoning_content") or "" for d in deltas)
    assert thought == "The user greets me."
    assert "".join(d.content or "" for d in deltas) == "Hello from Venti."
    finish = next(c for c in chunks if c.choices and c.choices[0].finish_reason)
    assert finish.model_extra["metadata"] == {"mol_adapter": "L0", "mol_route": "routed"}
    assert chunks[-1].usage.prompt_tokens_details.cached_tokens >= 0


def test_responses_without_a_model_route_and_report_reasoning(served):
    client = served.client()
    raw = client.responses.with_raw_response.create(input="hello there")
    response = raw.parse()
    assert raw.headers["x-mol-route"] == "routed" and response.model == PUBLIC
    assert [item.type for item in response.output] == ["reasoning", "message"]
    assert response.output[0].content[0].text == "The user greets me."
    assert response.output_text == "Hello from Venti."
    assert response.metadata == {"mol_adapter": "L0", "mol_route": "routed"}
    assert response.usage.input_tokens_details.cached_tokens >= 0
    events = list(client.responses.create(model=PUBLIC, input="hello, streamed", stream=True))
    kinds = [sdk_stream_event(e.model_dump(exclude_unset=True)) for e in events]
    assert "response.reasoning_text.delta" in kinds and "response.output_text.delta" in kinds
    assert kinds.index("response.reasoning_text.done") < kinds.index("response.output_text.delta")
    thought = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
    assert thought == "The user greets me."
    final = events[-1].response
    assert [item.type for item in final.output] == ["reasoning", "message"]
    assert next(e.output_index for e in events if e.type == "response.output_text.delta") == 1


def test_a_fifth_adapters_tool_calls_pin_back_to_it_through_chat(served):
    client, engine = served.client(), served.engine
    before = len(engine.requests)
    messages = user("file the report")
    first = client.chat.completions.with_raw_response.create(
        model=PUBLIC, messages=messages, tools=[LIST_FILES])
    assert first.headers["x-mol-adapter"] == "L4"
    [call] = first.parse().choices[0].message.tool_calls
    assert call.id.startswith("call_L4_") and call.function.name == "list_files"
    messages += [{"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
                 {"role": "tool", "tool_call_id": call.id, "content": "report.md, notes.md"}]
    second = client.chat.completions.with_raw_response.create(
        model=PUBLIC, messages=messages, tools=[LIST_FILES])
    assert (second.headers["x-mol-adapter"], second.headers["x-mol-route"]) == ("L4", "pinned")
    assert second.parse().choices[0].message.content == "Filed report.md."
    asked = [r["adapter"] for r in engine.requests[before:] if r["constraint"] is None
             and not r["body"]["messages"][-1]["content"].startswith("User: ")]
    assert asked == ["workspace_agent", "workspace_agent"]  # one route, then no routing
    assert len([r for r in engine.requests[before:] if r["constraint"]]) == 1


def test_a_fifth_adapters_tool_calls_pin_back_to_it_through_responses(served):
    client = served.client()
    first = client.responses.create(model=PUBLIC, input="file the report",
                                    tools=[{"type": "function", "name": "list_files",
                                            "parameters": {"type": "object"}}])
    [call] = [item for item in first.output if item.type == "function_call"]
    assert call.call_id.startswith("call_L4_")
    second = client.responses.with_raw_response.create(
        model=PUBLIC, previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id,
                "output": "report.md"}])
    assert second.headers["x-mol-adapter"] == "L4"
    assert second.parse().output_text == "Filed report.md."


def test_client_parameters_reach_the_answer_request_only(served):
    engine = served.engine
    before = len(engine.requests)
    served.client().chat.completions.create(
        model=PUBLIC, messages=user("tune it"), temperature=0.9, top_p=0.5, max_tokens=5000,
        stop=["END"], seed=7, tool_choice="none", parallel_tool_calls=False,
        response_format={"type": "json_object"}, reasoning_effort="high")
    [answer] = answer_requests(engine, "L2", before)
    assert {k: answer[k] for k in ("temperature", "top_p", "max_tokens", "stop", "seed",
                                   "tool_choice", "parallel_tool_calls", "response_format",
                                   "reasoning_effort")} == {
        "temperature": 0.9, "top_p": 0.5, "max_tokens": 100, "stop": ["END"], "seed": 7,
        "tool_choice": "none", "parallel_tool_calls": False,
        "response_format": {"type": "json_object"}, "reasoning_effort": "high"}
    route = next(r["body"] for r in engine.requests[before:] if r["constraint"])
    assert (route["temperature"], route["max_tokens"]) == (0, 24) and "seed" not in route
    before = len(engine.requests)
    served.client().chat.completions.create(model=PUBLIC, messages=user("tune it"),
                                            max_completion_tokens=60)
    [answer] = answer_requests(engine, "L2", before)
    assert (answer["max_tokens"], answer["temperature"]) == (60, 0.2)  # the adapter's own
    before = len(engine.requests)
    served.client().responses.create(
        model=PUBLIC, input="tune it again", temperature=0.1, top_p=0.9, max_output_tokens=50,
        tool_choice={"type": "function", "name": "shout"}, parallel_tool_calls=True,
        reasoning={"effort": "low"},
        text={"format": {"type": "json_schema", "name": "out", "schema": {"type": "object"}}})
    [answer] = answer_requests(engine, "L2", before)
    assert (answer["temperature"], answer["top_p"], answer["max_tokens"]) == (0.1, 0.9, 50)
    assert answer["tool_choice"] == {"type": "function", "function": {"name": "shout"}}
    assert answer["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "out", "schema": {"type": "object"}}}
    assert answer["reasoning_effort"] == "low" and answer["parallel_tool_calls"] is True


@pytest.mark.parametrize("extra, param", [
    ({"temperature": 5}, "temperature"), ({"max_tokens": 0}, "max_tokens"),
    ({"stop": [1]}, "stop"), ({"tool_choice": "always"}, "tool_choice"),
    ({"response_format": {"type": "yaml"}}, "response_format.type"),
    ({"reasoning_effort": 3}, "reasoning_effort")])
def test_a_bad_client_parameter_is_a_400_naming_it(served, extra, param):
    with pytest.raises(openai.BadRequestError) as caught:
        served.client().chat.completions.create(model=PUBLIC, messages=user("tune"),
                                                **extra)
    assert caught.value.body["param"] == param


def test_a_context_window_error_is_a_400_context_length_exceeded(served):
    with pytest.raises(openai.BadRequestError) as caught:
        served.client().chat.completions.create(model=PUBLIC, messages=user("a long one"))
    assert caught.value.body["code"] == "context_length_exceeded"
    assert "context window" in caught.value.body["message"]


@pytest.mark.parametrize("text, result", [
    ("make a malformed call", "Error: arguments are not valid JSON"),
    ("make an undeclared call", "Error: unknown tool 'no_such_tool'")])
def test_a_bad_tool_call_goes_back_to_the_model(served, text, result):
    before = len(served.engine.requests)
    reply = served.client().chat.completions.create(model=PUBLIC, messages=user(text))
    assert reply.choices[0].message.content == "recovered from the tool error"
    first, second = answer_requests(served.engine, "L2", before)
    assert first["messages"][-1] == {"role": "user", "content": text}
    assert second["messages"][-1]["role"] == "tool"
    assert second["messages"][-1]["content"].startswith(result)


def test_another_engine_failure_is_a_502_that_keeps_the_engines_words_in_the_log(served, caplog):
    with caplog.at_level(logging.WARNING, logger="mol.server"), \
            pytest.raises(openai.InternalServerError) as caught:
        served.client().chat.completions.create(model=PUBLIC, messages=user("boom"))
    body = caught.value.body
    assert caught.value.status_code == 502 and body["code"] == "engine_error"
    assert "CUDA" not in body["message"] and "litellm" not in body["message"].lower()
    assert body["message"] == "the model engine failed: it answered HTTP 500"
    assert any("CUDA out of memory" in record.getMessage() for record in caplog.records)
