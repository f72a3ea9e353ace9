"""The official ``anthropic`` SDK against ``mol serve`` (``/v1/messages``) in front of the
scripted engine: messages and streams, tool round trips, thinking blocks, token counts and
models. Every body and event mol sends is parsed with the SDK's own models."""

from __future__ import annotations

import json

import anthropic
import httpx
import pytest
from anthropic.types import Message, MessageTokensCount, RawMessageStreamEvent
from pydantic import TypeAdapter

from mol.runtime.scripted.replies import prompt_text, tokenize
from mol.runtime.testing import ScriptedEngine

from .conftest import answers, serve_app, settled_turns, transcript_problems

SCRIPT = """
[[L0]]
constrained = true
when = "weather|loud|midway"
times = -1
reply = "L1"
[[L0]]
constrained = true
when = "stop here|ramble"
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
times = -1
reasoning = "The user greets me."
reply = "Hello there."

[[L1]]
when = "weather"
times = -1
tool_calls = [{ name = "get_weather", arguments = { city = "Paris" } }]
[[L1]]
when = "^sunny"
times = -1
reply = "It is sunny in Paris."
[[L1]]
when = "midway"
times = -1
reasoning = "I will shout first."
tool_calls = [{ name = "shout", arguments = { text = "x" } }]
[[L1]]
when = "^X$"
times = -1
error = { status = 500, message = "the GPU caught fire" }

[[L2]]
when = "stop here"
times = -1
reply = "one two STOP three"
[[L2]]
when = "ramble"
times = -1
reply = "alpha beta gamma delta epsilon zeta eta theta iota kappa"
"""

WEATHER = {"name": "get_weather", "description": "Weather of a city.",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}
EVENTS = TypeAdapter(RawMessageStreamEvent)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("anthropic")
    extra = "[adapters.L2.params]\nmax_tokens = 6\n"
    with ScriptedEngine.serve(SCRIPT) as engine, \
            serve_app(tmp, engine.base_url, extra=extra) as server:
        server.engine = engine
        yield server



def post(served, body, path="/messages", **headers):
    return httpx.post(served.url + path, json=body, timeout=30,
                      headers={"x-api-key": served.key, "anthropic-version": "2023-06-01",
                               **headers})


def sse_events(served, body) -> list[tuple[str, dict]]:
    """The server-sent events of a streamed request: (event name, data)."""
    events = []
    with httpx.stream("POST", served.url + "/messages", json={**body, "stream": True},
                      headers={"x-api-key": served.key, "anthropic-version": "2023-06-01"},
                      timeout=30) as response:
        assert response.status_code == 200, response.read()
        name = None
        for line in response.iter_lines():
            if line.startswith("event: "):
                name = line[len("event: "):]
            elif line.startswith("data: "):
                events.append((name, json.loads(line[len("data: "):])))
    return events


def test_a_message_parses_with_the_sdk_and_carries_signed_thinking(served):
    raw = post(served, {"model": "mol", "max_tokens": 200,
                        "messages": [{"role": "user", "content": "hi"}]})
    assert raw.status_code == 200
    message = Message.model_validate(raw.json())
    thinking, text = message.content
    assert (thinking.type, thinking.thinking, text.text) == ("thinking", "The user greets me.",
                                                             "Hello there.")
    assert thinking.signature and message.stop_reason == "end_turn"
    assert message.id.startswith("msg_") and message.model == "mol"
    assert message.usage.input_tokens + message.usage.cache_read_input_tokens > 0
    assert raw.headers["x-mol-adapter"] == "L0" and raw.headers["x-mol-route"] == "routed"


def test_the_sdk_sends_thinking_back_and_the_conversation_goes_on(served):
    client = served.anthropic()
    messages = [{"role": "user", "content": "hello, first"}]
    first = client.messages.create(model="mol", max_tokens=200, messages=messages)
    assert first.content[0].type == "thinking"
    messages += [first.to_param(), {"role": "user", "content": "hello, second"}]
    second = client.messages.create(model="mol", max_tokens=200, messages=messages)
    assert second.content[-1].text == "Hello there."
    sent = [b["messages"] for b in answers(served.engine, "L0")
            if b["messages"][-1]["content"].startswith("hello, ")][-2:]
    # The second request extends the first byte for byte: the same stored conversation.
    assert sent[1][:len(sent[0])] == sent[0]
    assert sent[1][len(sent[0])] == {"role": "assistant", "content": "Hello there."}
    # Thinking changed by the client is refused, naming the block.
    block = messages[1]["content"][0].model_dump()
    messages[1] = {"role": "assistant", "content": [
        {**block, "thinking": "I was told otherwise."}, *messages[1]["content"][1:]]}
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(model="mol", max_tokens=200, messages=messages)
    assert caught.value.body["error"]["type"] == "invalid_request_error"
    assert "'messages[1].content[0].signature'" in caught.value.body["error"]["message"]


def test_thinking_disabled_switches_the_engine_off_and_sends_no_thinking(served):
    reply = served.anthropic().messages.create(
        model="mol", max_tokens=200, thinking={"type": "disabled"},
        messages=[{"role": "user", "content": "hello without thinking"}])
    assert [block.type for block in reply.content] == ["text"]
    record = next(r for r in reversed(served.engine.requests_for("L0"))
                  if r["body"]["messages"][-1]["content"] == "hello without thinking")
    assert record["thinking"] is False
    omitted = post(served, {"model": "mol", "max_tokens": 200, "messages": [
        {"role": "user", "content": "hello, omitted"}],
        "thinking": {"type": "adaptive", "display": "omitted"}}).json()
    assert omitted["content"][0]["thinking"] == "" and omitted["content"][0]["signature"]


def test_a_stream_is_the_exact_event_sequence_and_the_sdk_accumulates_it(served):
    events = sse_events(served, {"model": "mol", "max_tokens": 200,
                                 "messages": [{"role": "user", "content": "hi, streamed"}]})
    for name, data in events:
        assert name == data["type"]
        if name != "ping":
            EVENTS.validate_python(data)
    kinds = [name if name not in ("content_block_delta",) else data["delta"]["type"]
             for name, data in events]
    assert kinds[:4] == ["message_start", "ping", "content_block_start", "thinking_delta"]
    collapsed = [k for i, k in enumerate(kinds) if i == 0 or kinds[i - 1] != k]
    assert collapsed == ["message_start", "ping", "content_block_start", "thinking_delta",
                         "signature_delta", "content_block_stop", "content_block_start",
                         "text_delta", "content_block_stop", "message_delta", "message_stop"]
    assert [d["index"] for n, d in events if n == "content_block_start"] == [0, 1]
    delta = next(d for n, d in events if n == "message_delta")
    assert delta["delta"]["stop_reason"] == "end_turn" and delta["usage"]["output_tokens"] > 0
    with served.anthropic().messages.stream(
            model="mol", max_tokens=200,
            messages=[{"role": "user", "content": "hi, stream helper"}]) as stream:
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "text"]
    assert final.content[1].text == "Hello there." and final.content[0].signature


def test_a_tool_round_trip_lands_on_the_issuing_adapter(served):
    client = served.anthropic()
    messages = [{"role": "user", "content": "what is the weather?"}]
    first = client.messages.create(model="mol", max_tokens=200, tools=[WEATHER],
                                   messages=messages)
    [use] = first.content
    assert first.stop_reason == "tool_use" and use.type == "tool_use"
    assert use.id.startswith("call_L1_") and use.input == {"city": "Paris"}
    messages += [first.to_param(), {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": use.id, "content": "sunny, 24 C"}]}]
    second = client.messages.create(model="mol", max_tokens=200, tools=[WEATHER],
                                    messages=messages)
    assert second.content[0].text == "It is sunny in Paris."
    assert second.metadata == {"mol_adapter": "L1", "mol_route": "pinned"}
    last = served.engine.requests_for("L1")[-1]["body"]["messages"]
    assert last[-2]["tool_calls"][0]["id"] == use.id
    assert last[-1] == {"role": "tool", "tool_call_id": use.id, "content": "sunny, 24 C"}
    assert transcript_problems(served.engine.requests) == []
    # One turn of one stored conversation: the results continued it, routing nothing.
    [turn] = settled_turns(served.store, "what is the weather?", 1)
    assert turn[2:4] == ("complete", "L1")


def test_a_streamed_tool_call_and_its_result_in_blocks(served):
    events = sse_events(served, {"model": "mol", "max_tokens": 200, "tools": [WEATHER],
                                 "messages": [{"role": "user", "content": "weather, streamed"}]})
    start = next(d for n, d in events if n == "content_block_start")
    assert start["content_block"]["type"] == "tool_use"
    call_id = start["content_block"]["id"]
    partial = "".join(d["delta"]["partial_json"] for n, d in events
                      if n == "content_block_delta")
    assert json.loads(partial) == {"city": "Paris"}
    assert next(d for n, d in events if n == "message_delta")["delta"]["stop_reason"] == \
        "tool_use"
    reply = served.anthropic().messages.create(model="mol", max_tokens=200, tools=[WEATHER], messages=[
        {"role": "user", "content": "weather, streamed"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": call_id,
                                           "name": "get_weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id,
                                      "content": [{"type": "text", "text": "sunny"}]},
                                     {"type": "text", "text": "thanks"}]}])
    assert reply.content[0].text == "It is sunny in Paris."
    # The text beside the result went with it, to the adapter that issued the call.
    assert served.engine.requests_for("L1")[-1]["body"]["messages"][-1] == {
        "role": "tool", "tool_call_id": call_id, "content": "sunny\n\nthanks"}


def test_an_error_after_the_stream_started_is_an_error_event(served):
    events = sse_events(served, {"model": "mol", "max_tokens": 200,
                                 "messages": [{"role": "user", "content": "fail midway"}]})
    assert events[-1][0] == "error"
    assert events[-1][1] == {"type": "error", "error": {
        "type": "api_error", "message": "the model engine failed: it answered HTTP 500"}}
    assert "thinking_delta" in [d.get("delta", {}).get("type") for _, d in events]


def test_stop_sequences_and_the_token_budget_end_the_answer(served):
    client = served.anthropic()
    stopped = client.messages.create(model="mol", max_tokens=200, stop_sequences=["STOP"],
                                     messages=[{"role": "user", "content": "stop here"}])
    assert (stopped.stop_reason, stopped.stop_sequence) == ("stop_sequence", "STOP")
    assert stopped.content[0].text == "one two "
    # This SDK no longer names the sampling parameters; older ones and other clients send them.
    cut = client.messages.create(model="mol", max_tokens=100,
                                 extra_body={"temperature": 0.5, "top_p": 0.9, "top_k": 5},
                                 messages=[{"role": "user", "content": "ramble on"}])
    assert cut.stop_reason == "max_tokens" and cut.content[0].text == \
        "alpha beta gamma delta epsilon zeta"
    body = answers(served.engine, "L2")[-1]
    # The client's 100 is clamped to the adapter's params.max_tokens.
    assert (body["max_tokens"], body["temperature"], body["top_p"], body["top_k"]) == \
        (6, 0.5, 0.9, 5)


def test_tool_choice_and_server_tools(served):
    web = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
    deferred = {"name": "archive", "defer_loading": True, "input_schema": {"type": "object"}}
    raw = post(served, {"model": "mol", "max_tokens": 200, "tools": [WEATHER, web, deferred],
                        "tool_choice": {"type": "tool", "name": "get_weather",
                                        "disable_parallel_tool_use": True},
                        "messages": [{"role": "user", "content": "weather with search"}]})
    message = Message.model_validate(raw.json())
    assert message.stop_reason == "tool_use"
    assert raw.json()["metadata"]["mol_tools_left_out"] == "web_search_20250305"
    assert raw.headers["x-mol-tools-left-out"] == "web_search_20250305"
    body = served.engine.requests_for("L1")[-1]["body"]
    # The runtime's tool, then the client's sorted; a deferred one too (mol runs no tool
    # search), the server tool not.
    assert [t["function"]["name"] for t in body["tools"]] == ["shout", "archive",
                                                               "get_weather"]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert body["parallel_tool_calls"] is False


def test_count_tokens_is_the_engines_count(served):
    tools = [WEATHER]
    messages = [{"role": "user", "content": "how long is this?"}]
    counted = served.anthropic().messages.count_tokens(
        model="mol", system="Be brief.", messages=messages, tools=tools)
    assert isinstance(counted, MessageTokensCount)
    chat = {"messages": [{"role": "system", "content": "Be brief."}, *messages],
            "tools": [{"type": "function", "function": {
                "name": "get_weather", "parameters": WEATHER["input_schema"],
                "description": WEATHER["description"]}}]}
    assert counted.input_tokens == len(tokenize(prompt_text(chat)))


def test_count_tokens_estimates_without_the_engines_tokenizer(tmp_path):
    with serve_app(tmp_path, "http://127.0.0.1:9/v1") as server:
        counted = server.anthropic().messages.count_tokens(
            model="mol", messages=[{"role": "user", "content": "x" * 400}])
    assert 100 <= counted.input_tokens <= 115


def test_models_in_the_anthropic_shape_and_claude_codes_names(served):
    client = served.anthropic()
    assert [m.id for m in client.models.list()] == ["mol", "L0", "L1", "L2", "L3"]
    assert client.models.retrieve("L2").display_name == "L2"
    raw = post(served, {"model": "claude-opus-4-5-20251101", "max_tokens": 50,
                        "messages": [{"role": "user", "content": "hi from claude"}]})
    assert raw.status_code == 200 and raw.headers["x-mol-route"] == "routed"
    assert raw.json()["model"] == "claude-opus-4-5-20251101"
