"""The Responses API over a WebSocket (``GET /v1/responses`` upgraded), driven by the official
``openai`` client's ``responses.connect()``: several responses on one connection chained by
``previous_response_id`` (stored, and ``store: false`` kept by the connection), the same
events as the SSE stream, errors as ``error`` events, the key, and a connection that stays
open longer than the head deadline."""

from __future__ import annotations

import json

import httpx
import openai
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from mol.runtime.testing import ScriptedEngine

from .conftest import KEY, answers, serve_app, settled_turns, transcript_problems

SCRIPT = """
[[L0]]
constrained = true
when = "weather"
times = -1
reply = "L1"
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
when = "slowly"
delay = 1.5
times = -1
reply = "Done waiting."
[[L0]]
constrained = false
times = -1
reply = "Hello there."
[[L1]]
when = "weather"
times = -1
tool_calls = [{ name = "get_weather", arguments = { city = "Paris" } }]
[[L1]]
when = "^sunny"
times = -1
reply = "It is sunny in Paris."
"""

WEATHER = {"type": "function", "name": "get_weather",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("websocket")
    with ScriptedEngine.serve(SCRIPT) as engine, \
            serve_app(tmp, engine.base_url, header_timeout=1) as server:
        server.engine = engine
        yield server


def until_done(connection) -> list:
    """The events of one response (its last is ``response.completed`` or an error)."""
    events = []
    for event in connection:
        events.append(event)
        if event.type in ("response.completed", "response.failed", "error"):
            return events
    raise AssertionError("the connection closed mid-response")


def test_two_chained_responses_on_one_websocket(served):
    client = served.client()
    with client.responses.connect() as connection:
        connection.response.create(model="mol", input="hello, first")
        first = until_done(connection)
        connection.response.create(model="mol", input="hello, second",
                                   previous_response_id=first[-1].response.id)
        second = until_done(connection)
    assert first[-1].response.output_text == second[-1].response.output_text == "Hello there."
    assert second[-1].response.previous_response_id == first[-1].response.id
    # The same events as the SSE stream of the same request, in the same order.
    with client.responses.stream(model="mol", input="hello, over http") as stream:
        over_http = [event.type for event in stream]
    assert [event.type for event in first] == over_http
    assert [e.sequence_number for e in first] == list(range(len(first)))
    sent = [b["messages"] for b in answers(served.engine, "L0")
            if b["messages"][-1]["content"].startswith("hello, ")]
    # The second response continued the stored conversation: its request extends the first.
    assert sent[1][:len(sent[0])] == sent[0]
    # Both responses are stored, and readable over HTTP.
    assert client.responses.retrieve(second[-1].response.id).output_text == "Hello there."


def test_store_false_responses_chain_on_their_connection_only(served):
    client = served.client()
    with client.responses.connect() as connection:
        connection.response.create(model="mol", input="weather please", tools=[WEATHER],
                                   store=False, stream_id="lane-1")
        first = until_done(connection)
        [call] = first[-1].response.output
        assert all(event.stream_id == "lane-1" for event in first)
        assert call.call_id.startswith("call_L1_")
        # Codex sends only the new items, chained to the response it kept.
        connection.response.create(model="mol", store=False, tools=[WEATHER],
                                   previous_response_id=first[-1].response.id, input=[
                                       {"type": "function_call_output",
                                        "call_id": call.call_id, "output": "sunny, 24 C"}])
        second = until_done(connection)
    assert second[-1].response.output_text == "It is sunny in Paris."
    last = served.engine.requests_for("L1")[-1]["body"]["messages"]
    assert last[-1] == {"role": "tool", "tool_call_id": call.call_id, "content": "sunny, 24 C"}
    assert transcript_problems(served.engine.requests) == []
    # One conversation, in memory only: nothing stored, and unknown elsewhere.
    assert settled_turns(served.store, "weather please", 0, timeout=1) == []
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="mol", input="again",
                                previous_response_id=second[-1].response.id)


def test_a_response_without_output_prepares_the_next_one(served):
    client = served.client()
    with client.responses.connect() as connection:
        connection.response.create(model="mol", store=False, generate=False,
                                   instructions="Answer briefly.", input=[
                                       {"role": "developer", "content": "You may greet."}])
        warm = until_done(connection)
        connection.response.create(model="mol", store=False, input="hello, warmed up",
                                   previous_response_id=warm[-1].response.id)
        answer = until_done(connection)
    assert [e.type for e in warm] == ["response.created", "response.completed"]
    assert warm[-1].response.output == [] and warm[-1].response.status == "completed"
    assert answer[-1].response.output_text == "Hello there."
    assert answer[-1].response.previous_response_id == warm[-1].response.id
    sent = answers(served.engine, "L0")[-1]["messages"]
    # The prepared input comes first, then the new message: one request, nothing lost.
    assert [m["content"] for m in sent[1:]] == ["Answer briefly.", "You may greet.",
                                               "hello, warmed up"]


def test_errors_are_error_events_and_the_connection_goes_on(served):
    with served.client().responses.connect() as connection:
        connection.response.create(model="mol", input="hi", previous_response_id="resp_nope")
        [missing] = until_done(connection)
        connection.response.create(model="gpt-4", input="hi")
        [unknown] = until_done(connection)
        connection.send({"type": "response.steer", "previous_response_id": "resp_x",
                         "input": "faster"})
        [steer] = until_done(connection)
        connection.response.create(model="mol", input="hello, still here")
        alive = until_done(connection)
    assert (missing.type, missing.status, missing.error.param) == (
        "error", 404, "previous_response_id")
    assert (unknown.status, unknown.error.code) == (404, "model_not_found")
    assert steer.status == 400 and "response.steer" in steer.error.message
    assert alive[-1].response.output_text == "Hello there."


def test_the_websocket_outlives_the_head_deadline(served):
    # header_timeout is 1 s: a connection's head deadline ends with its upgrade.
    with served.client().responses.connect() as connection:
        connection.response.create(model="L0", input="answer slowly")
        slow = until_done(connection)
        connection.response.create(model="mol", input="hello, later")
        later = until_done(connection)
    assert slow[-1].response.output_text == "Done waiting."
    assert later[-1].response.output_text == "Hello there."


def test_the_handshake_needs_the_key_and_is_counted(served):
    url = served.url.replace("http://", "ws://") + "/responses"
    for headers in [{}, {"Authorization": "Bearer nope"}, {"x-api-key": "nope"}]:
        with pytest.raises(InvalidStatus) as refused:
            connect(url, additional_headers=headers, open_timeout=10).close()
        assert refused.value.response.status_code == 401
        assert json.loads(refused.value.response.body)["error"]["code"] == "invalid_api_key"
    with connect(url, additional_headers={"Authorization": f"Bearer {KEY}"}) as socket:
        socket.send(json.dumps({"type": "response.create", "model": "mol",
                                "input": "hello, raw"}))
        kinds = []
        while not kinds or kinds[-1] != "response.completed":
            kinds.append(json.loads(socket.recv(timeout=30))["type"])
    metrics = httpx.get(served.url.removesuffix("/v1") + "/metrics",
                        headers={"Authorization": f"Bearer {KEY}"}).text
    assert 'mol_http_requests_total{route="/v1/responses",status="101"}' in metrics
