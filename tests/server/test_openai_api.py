"""The official openai client, sync and async, streaming and not, against a real uvicorn."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time

import anyio
import httpx
import openai
import pytest

from mol.runtime.testing import ScriptedEngine

from .conftest import WEATHER_TOOL, answers, sdk_stream_event, serve_app

SCRIPT = """
[[L0]]
constrained = true
when = "weather|loud|resume"
times = -1
reply = "L1"
[[L0]]
constrained = true
when = "code|boom"
times = -1
reply = "L2"
[[L0]]
constrained = true
times = -1
reply = "L0"

[[L0]]
constrained = false
when = "^User: .*slow summary"
delay = 1.5
times = -1
reply = "summary after a while"
[[L0]]
constrained = false
when = "^User: "
times = -1
reply = "summary"
[[L0]]
constrained = false
when = "^be patient"
delay = 1
times = -1
reply = "Thanks for waiting."
[[L0]]
constrained = false
when = "first|second|third|fourth|slow summary"
times = -1
reply = "Noted, friend."

[[L1]]
when = "weather"
times = -1
tool_calls = [{ name = "get_weather", arguments = { city = "Paris" } }]
[[L1]]
when = "^sunny"
times = -1
reply = "It is sunny in Paris."
[[L1]]
when = "loud"
times = -1
tool_calls = [{ name = "shout", arguments = { text = "hello" } }]
[[L1]]
when = "^HELLO$"
times = -1
reply = "I shouted."

[[L2]]
when = "code"
times = -1
reply = "def answer():\\n    return 42"
[[L2]]
when = "boom"
times = -1
error = { status = 422, message = "the GPU caught fire" }
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("served")
    with ScriptedEngine.serve(SCRIPT) as engine, serve_app(tmp, engine.base_url) as server:
        server.engine = engine
        yield server


def test_models_list_the_entry_model_and_the_adapters(served):
    assert [m.id for m in served.client().models.list()] == ["mol", "L0", "L1", "L2", "L3"]


def test_unknown_model_is_a_404_naming_the_field(served):
    with pytest.raises(openai.NotFoundError) as caught:
        served.client().chat.completions.create(
            model="gpt-4", messages=[{"role": "user", "content": "hi"}])
    assert caught.value.body["param"] == "model" and "'gpt-4'" in caught.value.body["message"]


def test_chat_continues_the_stored_conversation_byte_for_byte(served):
    client = served.client()
    messages = [{"role": "system", "content": "Answer in English."},
                {"role": "user", "content": "the first chat turn"}]
    first = client.chat.completions.create(model="mol", messages=messages)
    assert first.choices[0].message.content == "Noted, friend."
    assert first.choices[0].finish_reason == "stop" and first.usage.total_tokens > 0
    messages += [{"role": "assistant", "content": first.choices[0].message.content},
                 {"role": "user", "content": "the second chat turn"}]
    second = client.chat.completions.create(model="mol", messages=messages)
    assert second.choices[0].message.content == "Noted, friend."
    sent = [b["messages"] for b in answers(served.engine, "L0")
            if "chat turn" in b["messages"][-1]["content"]][-2:]
    # The second request extends the first (plus its answer) byte for byte: a continuation,
    # with the adapter's own prompt first and the client's system message after it.
    assert sent[1][:len(sent[0])] == sent[0]
    assert sent[0][0]["content"] == "You chat." and sent[0][1] == messages[0]
    assert sent[1][len(sent[0])] == {"role": "assistant", "content": "Noted, friend."}


def test_chat_pinned_adapter_skips_routing(served):
    before = len(served.engine.requests_for("L0"))
    reply = served.client().chat.completions.create(
        model="L2", messages=[{"role": "user", "content": "write code"}])
    assert reply.choices[0].message.content.startswith("def answer")
    routes = [r for r in served.engine.requests_for("L0")[before:]
              if "structured_outputs" in r["body"]]
    assert routes == []


@pytest.mark.anyio
async def test_chat_streams_real_chunks_and_ends_before_the_summary(served):
    async with served.async_client() as client:
        stream = await client.chat.completions.create(
            model="mol", messages=[{"role": "user", "content": "a slow summary please"}],
            stream=True, stream_options={"include_usage": True})
        chunks = [chunk async for chunk in stream]
        # (The engine notes a request's duration once it has answered it.)
        summaries = [r for r in served.engine.requests_for("L0")
                     if "User: a slow summary please" in json.dumps(r["body"])]
    texts = [c.choices[0].delta.content for c in chunks if c.choices and
             c.choices[0].delta.content]
    assert len(texts) >= 2 and "".join(texts) == "Noted, friend."
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0
    # The summary hop takes 1.5 s; the reply ended before the engine had answered it.
    assert all("duration" not in r for r in summaries), summaries


def test_chat_client_tool_round_trip_lands_on_the_issuing_adapter(served):
    client = served.client()
    messages = [{"role": "user", "content": "what is the weather?"}]
    first = client.chat.completions.create(model="mol", messages=messages, tools=[WEATHER_TOOL])
    call = first.choices[0].message.tool_calls[0]
    assert first.choices[0].finish_reason == "tool_calls"
    assert call.id.startswith("call_L1_") and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    routes = len([r for r in served.engine.requests_for("L0") if "structured_outputs" in
                  r["body"]])
    messages += [first.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": "sunny, 24 C"}]
    second = client.chat.completions.create(model="mol", messages=messages, tools=[WEATHER_TOOL])
    assert second.choices[0].message.content == "It is sunny in Paris."
    after = len([r for r in served.engine.requests_for("L0") if "structured_outputs" in
                 r["body"]])
    assert after == routes  # no routing for tool results
    last = served.engine.requests_for("L1")[-1]["body"]["messages"]
    assert last[-1] == {"role": "tool", "tool_call_id": call.id, "content": "sunny, 24 C"}


def test_a_new_user_turn_instead_of_tool_results_closes_the_open_calls(served):
    client = served.client()
    messages = [{"role": "user", "content": "weather or not?"}]
    first = client.chat.completions.create(model="mol", messages=messages, tools=[WEATHER_TOOL])
    call = first.choices[0].message.tool_calls[0]
    messages += [first.choices[0].message.model_dump(exclude_none=True),
                 {"role": "user", "content": "never mind, be loud"}]
    second = client.chat.completions.create(model="mol", messages=messages, tools=[WEATHER_TOOL])
    assert second.choices[0].message.content == "I shouted."
    sent = next(r["body"]["messages"] for r in served.engine.requests_for("L1")
                if r["body"]["messages"][-1]["content"] == "never mind, be loud")
    at = next(i for i, m in enumerate(sent) if m.get("tool_calls") and
              m["tool_calls"][0]["id"] == call.id)
    assert sent[at + 1]["tool_call_id"] == call.id
    assert sent[at + 1]["content"].startswith("[no result: the client went on")


@pytest.mark.anyio
async def test_chat_streamed_tool_call_and_unknown_call_id(served):
    async with served.async_client() as client:
        stream = await client.chat.completions.create(
            model="mol", messages=[{"role": "user", "content": "weather again?"}],
            tools=[WEATHER_TOOL], stream=True)
        chunks = [c async for c in stream]
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(model="mol", messages=[
                {"role": "user", "content": "x"},
                {"role": "tool", "tool_call_id": "call_abc", "content": "y"}])
    calls = [t for c in chunks for t in (c.choices[0].delta.tool_calls or [])]
    assert calls[0].id.startswith("call_L1_") and calls[0].function.name == "get_weather"
    # Fragments as the adapter produced them: the id and name once, the arguments in pieces.
    assert len(calls) > 1 and all(c.id is None and c.index == 0 for c in calls[1:])
    arguments = "".join(c.function.arguments or "" for c in calls)
    assert json.loads(arguments) == {"city": "Paris"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assert caught.value.body["param"] == "messages[1].tool_call_id"


def test_runtime_tools_run_server_side(served):
    reply = served.client().chat.completions.create(
        model="mol", messages=[{"role": "user", "content": "be loud"}])
    assert reply.choices[0].message.content == "I shouted."
    assert reply.choices[0].message.tool_calls is None


def test_responses_chain_over_three_turns(served):
    client = served.client()
    r1 = client.responses.create(model="mol", input="the first response turn",
                                 instructions="Be brief.")
    r2 = client.responses.create(model="mol", input="the second response turn",
                                 previous_response_id=r1.id)
    r3 = client.responses.create(model="mol", input="the third response turn",
                                 previous_response_id=r2.id)
    assert [r.output_text for r in (r1, r2, r3)] == ["Noted, friend."] * 3
    view = next(b["messages"] for b in answers(served.engine, "L0")
            if "third response" in b["messages"][-1]["content"])
    users = [m["content"] for m in view if m["role"] == "user"]
    assert users == [f"the {n} response turn" for n in ("first", "second", "third")]
    assert view[:2] == [{"role": "system", "content": "You chat."},
                        {"role": "system", "content": "Be brief."}]
    stored = client.responses.retrieve(r2.id)
    assert stored.id == r2.id and stored.previous_response_id == r1.id
    assert stored.output_text == "Noted, friend."
    # Continuing from r1 again forks: the new branch never saw the second and third turns.
    client.responses.create(model="mol", input="the fourth response turn",
                            previous_response_id=r1.id)
    fork = next(b["messages"] for b in answers(served.engine, "L0")
            if "fourth response" in b["messages"][-1]["content"])
    assert [m["content"] for m in fork if m["role"] == "user"] == [
        "the first response turn", "the fourth response turn"]


def test_store_false_is_not_chainable(served):
    client = served.client()
    loose = client.responses.create(model="mol", input="the first loose turn", store=False)
    assert loose.output_text == "Noted, friend."
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(model="mol", input="the second turn",
                                previous_response_id=loose.id)
    assert caught.value.body["param"] == "previous_response_id"
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(loose.id)
    with contextlib.closing(sqlite3.connect(served.store)) as db:
        count = db.execute("SELECT COUNT(*) FROM responses WHERE id = ?", (loose.id,))
        assert count.fetchone() == (0,)


@pytest.mark.anyio
async def test_responses_stream_with_a_function_call_round_trip(served):
    tool = {"type": "function", "name": "get_weather", "description": "Weather of a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
    async with served.async_client() as client:
        first, kinds = await _stream(client, input="weather in Paris?", tools=[tool])
        call = first.output[0]
        second, kinds2 = await _stream(
            client, previous_response_id=first.id, tools=[tool],
            input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}])
    assert kinds == ["response.created", "response.in_progress", "response.output_item.added",
                     "response.function_call_arguments.delta",
                     "response.function_call_arguments.done", "response.output_item.done",
                     "response.completed"]
    assert call.type == "function_call" and call.call_id.startswith("call_L1_")
    kinds = kinds2
    assert second.output_text == "It is sunny in Paris."
    assert kinds[:4] == ["response.created", "response.in_progress",
                         "response.output_item.added", "response.content_part.added"]
    assert "response.output_text.delta" in kinds and kinds[-4:] == [
        "response.output_text.done", "response.content_part.done",
        "response.output_item.done", "response.completed"]


async def _stream(client, **kwargs):
    async with client.responses.stream(model="mol", **kwargs) as stream:
        kinds = [event.type async for event in stream]
        return await stream.get_final_response(), kinds


def test_sync_responses_stream_helper(served):
    with served.client().responses.stream(model="mol", input="the first sync stream") as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == final.output_text == "Noted, friend."


def test_engine_failure_is_a_502_in_the_openai_shape(served):
    with pytest.raises(openai.InternalServerError) as caught:
        served.client().chat.completions.create(
            model="mol", messages=[{"role": "user", "content": "boom"}])
    assert caught.value.status_code == 502
    # What failed, in mol's words: the engine's own text goes to the log, not to the client.
    assert caught.value.body["message"] == "the model engine failed: it answered HTTP 422"
    assert caught.value.body["code"] == "engine_error"


@pytest.mark.parametrize(("body", "status", "needle"), [
    (b"{not json", 400, "not valid JSON"),
    (b"[1, 2]", 400, "must be a JSON object, got an array"),
    (b'{"model": "mol"}', 400, "missing required field 'messages'"),
    (b'{"model": "mol", "messages": "hi"}', 400, "'messages' must be an array, got a string"),
    (b'{"model": "mol", "messages": [{"role": "robot", "content": "x"}]}', 400,
     "'messages[0].role' must be one of"),
    (b'{"model": "mol", "messages": [{"role": "user", "content": 5}]}', 400,
     "'messages[0].content' must be a string, an array of parts or null, got a number"),
    (b'{"model": "mol", "messages": [{"role": "user", "content": "x"}], "stream": "yes"}',
     400, "'stream' must be a boolean, got a string"),
    (b'{"model": 7, "messages": []}', 400, "'model' must be a string, got a number"),
    (b"x" * (4 * 1024 * 1024 + 1), 413, "exceeds the limit"),
])
def test_bad_bodies_name_what_is_wrong(served, body, status, needle):
    answer = httpx.post(served.url + "/chat/completions", content=body, timeout=30,
                        headers={"Authorization": f"Bearer {served.key}",
                                 "Content-Type": "application/json"})
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert needle in error["message"] and set(error) == {"message", "type", "param", "code"}


def test_sessions_record_digest_routes_tools_and_usage(served):
    with contextlib.closing(sqlite3.connect(served.store)) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        rows = db.execute("SELECT hcp_digest, usage, events FROM turns WHERE user_text = "
                          "'be loud'").fetchall()
    digest, usage, events = rows[0]
    assert digest.startswith("sha256:") and json.loads(usage)["prompt_tokens"] > 0
    kinds = [e["type"] for e in json.loads(events)]
    assert kinds[:2] == ["model_call", "route"] and "tool_call" in kinds and "tool_result" in kinds


@pytest.mark.anyio
async def test_a_follow_up_waits_for_the_summary_of_the_turn_before(served):
    # The reply ends before the slow summary; the follow-up continues the same conversation.
    messages = [{"role": "user", "content": "slow summary then first"}]
    with anyio.fail_after(20):
        async with served.async_client() as client:
            first = await client.chat.completions.create(model="mol", messages=messages)
            messages += [{"role": "assistant", "content": first.choices[0].message.content},
                         {"role": "user", "content": "the second quick turn"}]
            await client.chat.completions.create(model="mol", messages=messages)
    sent = next(b["messages"] for b in answers(served.engine, "L0")
            if "second quick" in b["messages"][-1]["content"])
    assert [m["content"] for m in sent if m["role"] == "user"] == [
        "slow summary then first", "the second quick turn"]


def test_a_client_that_hangs_up_does_not_stop_the_turn(served):
    body = {"model": "mol", "stream": True,
            "messages": [{"role": "user", "content": "be patient with me"}]}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(served.url + "/chat/completions", json=body, timeout=0.3,
                   headers={"Authorization": f"Bearer {served.key}"})

    def status() -> list[tuple[str, str]]:
        with contextlib.closing(sqlite3.connect(served.store)) as db:
            return db.execute("SELECT status, answer FROM turns WHERE user_text = "
                              "'be patient with me'").fetchall()

    deadline = time.monotonic() + 20
    while status() != [("complete", "Thanks for waiting.")]:
        assert time.monotonic() < deadline, status()
        time.sleep(0.05)


@pytest.mark.parametrize("body", [
    {"input": "the first stream checked against the SDK"},
    {"input": "weather in Paris?", "tools": [{"type": "function", "name": "get_weather",
                                              "parameters": {"type": "object"}}]},
    {"input": "code, checked against the SDK", "instructions": "Be brief."},
], ids=["text", "function-call", "routed-text"])
def test_every_streamed_event_is_one_the_openai_sdk_defines(served, body):
    """The Responses stream's events are the SDK's own (``ResponseStreamEvent``): each
    ``type`` is one the SDK defines, and each event validates as that type's model (every
    field the SDK requires is there). mol writes the names by hand; this is where they
    meet their definition."""
    seen = []
    with httpx.stream("POST", f"{served.url}/responses", timeout=60,
                      headers={"Authorization": f"Bearer {served.key}"},
                      json={"model": "mol", "stream": True, **body}) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                seen.append(sdk_stream_event(json.loads(line.removeprefix("data: "))))
    assert seen[0] == "response.created" and seen[-1] == "response.completed"


@pytest.mark.parametrize("body", [
    {"messages": [{"role": "user", "content": "the first chunks checked against the SDK"}],
     "stream_options": {"include_usage": True}},
    {"messages": [{"role": "user", "content": "weather in Paris?"}], "tools": [WEATHER_TOOL]},
], ids=["text", "tool-call"])
def test_every_streamed_chunk_is_the_openai_sdks_chunk(served, body):
    """Each Chat Completions chunk validates as the SDK's ``ChatCompletionChunk``, and the
    whole answer as its ``ChatCompletion``: every field the SDK requires, of its type."""
    from openai.types.chat import ChatCompletion, ChatCompletionChunk

    headers = {"Authorization": f"Bearer {served.key}"}
    chunks = []
    with httpx.stream("POST", f"{served.url}/chat/completions", timeout=60, headers=headers,
                      json={"model": "mol", "stream": True, **body}) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(ChatCompletionChunk.model_validate_json(line.removeprefix("data: ")))
    assert chunks and any(c.choices and c.choices[0].finish_reason for c in chunks)
    body = {k: v for k, v in body.items() if k != "stream_options"}
    whole = httpx.post(f"{served.url}/chat/completions", timeout=60, headers=headers,
                       json={"model": "mol", **body})
    assert whole.status_code == 200, whole.text
    ChatCompletion.model_validate(whole.json())
