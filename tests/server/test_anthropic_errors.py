"""Errors of ``/v1/messages`` in the Anthropic API's shape, as the ``anthropic`` SDK raises
them: the key, the model, the body's fields, tool results that do not answer the waiting
turn, images, and a server out of turn slots (529)."""

from __future__ import annotations

import threading
import time

import anthropic
import httpx
import pytest
from anthropic.types import ErrorResponse

from mol.runtime.testing import ScriptedEngine

from .conftest import serve_app, settled_turns

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
delay = 3
times = -1
reply = "At last."
[[L0]]
constrained = false
times = -1
reply = "Hello there."
[[L1]]
when = "weather"
times = -1
tool_calls = [{ name = "get_weather", arguments = { city = "Paris" } },
              { name = "get_weather", arguments = { city = "Rome" } }]
[[L1]]
when = "sunny"
times = -1
reply = "Sunny in both."
"""

WEATHER = {"name": "get_weather", "input_schema": {"type": "object",
                                                   "properties": {"city": {"type": "string"}}}}


@pytest.fixture(scope="module")
def engine():
    with ScriptedEngine.serve(SCRIPT) as engine:
        yield engine


@pytest.fixture(scope="module")
def served(tmp_path_factory, engine):
    with serve_app(tmp_path_factory.mktemp("errors"), engine.base_url) as server:
        yield server



def error_of(caught) -> dict:
    """The error body the SDK raised, checked against the SDK's ``ErrorResponse``."""
    ErrorResponse.model_validate(caught.value.body)
    return caught.value.body["error"]


def test_a_wrong_key_is_an_authentication_error_and_either_header_works(served):
    with pytest.raises(anthropic.AuthenticationError) as caught:
        served.anthropic(api_key="sk-wrong").messages.create(
            model="mol", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    assert error_of(caught)["type"] == "authentication_error"
    assert caught.value.response.headers["www-authenticate"] == "Bearer"
    bearer = served.anthropic(api_key=None, auth_token=served.key).messages.create(
        model="mol", max_tokens=10, messages=[{"role": "user", "content": "hi by bearer"}])
    assert bearer.content[0].text == "Hello there."
    # Before any routing too, and on paths that do not exist.
    answer = httpx.get(served.url + "/nowhere", headers={"anthropic-version": "2023-06-01"})
    assert answer.status_code == 401 and answer.json()["type"] == "error"


def test_an_unknown_model_and_path_are_not_found_errors(served):
    with pytest.raises(anthropic.NotFoundError) as caught:
        served.anthropic().messages.create(model="gpt-4", max_tokens=10,
                                          messages=[{"role": "user", "content": "hi"}])
    error = error_of(caught)
    assert error["type"] == "not_found_error" and "'gpt-4'" in error["message"]
    answer = httpx.post(served.url + "/messages/nowhere", json={},
                        headers={"x-api-key": served.key})
    assert answer.status_code == 404
    assert ErrorResponse.model_validate(answer.json()).error.type == "not_found_error"


@pytest.mark.parametrize("body, named", [
    ({"messages": [{"role": "user", "content": "hi"}]}, "'max_tokens'"),
    ({"max_tokens": 0, "messages": [{"role": "user", "content": "hi"}]}, "'max_tokens'"),
    ({"max_tokens": 9, "messages": []}, "'messages'"),
    ({"max_tokens": 9, "messages": [{"role": "robot", "content": "hi"}]}, "'messages[0].role'"),
    ({"max_tokens": 9, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "what is this?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": "iVBORw0KGgo="}}]}]},
     "'messages[0].content[1].type' 'image' is not supported: mol's adapters read text"),
    ({"max_tokens": 9, "temperature": 1.5, "messages": [{"role": "user", "content": "hi"}]},
     "'temperature'"),
    ({"max_tokens": 9, "tool_choice": {"type": "sometimes"},
      "messages": [{"role": "user", "content": "hi"}]}, "'tool_choice.type'"),
    ({"max_tokens": 9, "thinking": {"type": "enabled"},
      "messages": [{"role": "user", "content": "hi"}]}, "'thinking.budget_tokens'"),
    ({"max_tokens": 9, "messages": [{"role": "assistant", "content": "I speak first"}]},
     "the last entry of 'messages' must be a user message"),
])
def test_a_bad_body_is_an_invalid_request_error_naming_the_field(served, body, named):
    answer = httpx.post(served.url + "/messages", json={"model": "mol", **body},
                        headers={"x-api-key": served.key, "anthropic-version": "2023-06-01"})
    assert answer.status_code == 400
    error = ErrorResponse.model_validate(answer.json()).error
    assert error.type == "invalid_request_error" and named in error.message


def test_tool_results_must_answer_the_waiting_turns_calls(served):
    client = served.anthropic()
    messages = [{"role": "user", "content": "weather in two cities"}]
    first = client.messages.create(model="mol", max_tokens=50, tools=[WEATHER],
                                   messages=messages)
    paris, rome = (block.id for block in first.content)
    messages.append(first.to_param())

    def results(*pairs) -> list[dict]:
        return [*messages, {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call, "content": text}
            for call, text in pairs]}]

    cases = [
        (results((paris, "sunny"), ("toolu_01A09q90qw90lq917835lq9", "sunny")),
         "'messages[2].content[1].tool_use_id' 'toolu_01A09q90qw90lq917835lq9' was not "
         "issued by mol"),
        (results((paris, "sunny"), (paris[:-4] + "beef", "sunny")),
         "'messages[2].content[1].tool_use_id'"),
        (results((paris, "sunny"), (paris, "sunny again")),
         "'messages[2].content[1].tool_use_id' answers"),
        (results((paris, "sunny")), "leaves the waiting turn's calls"),
    ]
    for sent, named in cases:
        with pytest.raises(anthropic.BadRequestError) as caught:
            client.messages.create(model="mol", max_tokens=50, tools=[WEATHER], messages=sent)
        error = error_of(caught)
        assert error["type"] == "invalid_request_error" and named in error["message"], named
    # Nothing was touched: the right results still finish the turn, in the same conversation.
    done = client.messages.create(model="mol", max_tokens=50, tools=[WEATHER],
                                  messages=results((paris, "sunny"), (rome, "sunny")))
    assert done.content[0].text == "Sunny in both."
    [turn] = settled_turns(served.store, "weather in two cities", 1)
    assert turn[2] == "complete" and turn[3] == "L1"


def test_a_server_out_of_turn_slots_is_overloaded(tmp_path, engine):
    with serve_app(tmp_path, engine.base_url, max_turns=1, queue=0) as server:
        slow = threading.Thread(target=lambda: server.anthropic().messages.create(
            model="L0", max_tokens=10, messages=[{"role": "user", "content": "slowly now"}]))
        slow.start()
        time.sleep(1)
        with pytest.raises(anthropic.APIStatusError) as caught:
            server.anthropic().messages.create(model="mol", max_tokens=10,
                                              messages=[{"role": "user", "content": "hi"}])
        slow.join()
    assert caught.value.status_code == 529
    assert error_of(caught)["type"] == "overloaded_error"
    assert int(caught.value.response.headers["retry-after"]) >= 1
