"""Tool results must answer the open calls of the waiting turn: exactly the ids it issued,
each once. Anything else is a 400 naming the field in the API's own terms
(``messages[i].tool_call_id``, ``input[i].call_id``), and the conversation is untouched:
the right results afterwards still continue it."""

from __future__ import annotations

import openai
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
when = "two cities"
times = -1
tool_calls = [{ name = "get_weather", arguments = { city = "Paris" } },
              { name = "get_weather", arguments = { city = "Rome" } }]
[[L1]]
when = "weather"
times = -1
tool_calls = [{ name = "get_weather", arguments = { city = "Paris" } }]
[[L1]]
times = -1
reply = "Answered from the results."
"""

CHAT_TOOL = {"type": "function", "function": {
    "name": "get_weather", "parameters": {"type": "object",
                                          "properties": {"city": {"type": "string"}}}}}
RESPONSES_TOOL = {"type": "function", "name": "get_weather",
                  "parameters": CHAT_TOOL["function"]["parameters"]}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("results")
    with ScriptedEngine.serve(SCRIPT) as engine, serve_app(tmp, engine.base_url) as server:
        server.engine = engine
        yield server


def refused(call) -> dict:
    with pytest.raises(openai.BadRequestError) as caught:
        call()
    return caught.value.body


def chat_asking(client, text: str):
    """A chat history ending with the assistant's tool calls (as the client holds it)."""
    messages = [{"role": "user", "content": text}]
    reply = client.chat.completions.create(model="mol", messages=messages, tools=[CHAT_TOOL])
    return [*messages, reply.choices[0].message.model_dump(exclude_none=True)], \
        [c.id for c in reply.choices[0].message.tool_calls]


def test_chat_results_must_answer_the_open_calls(served):
    client = served.client()
    history, [call_id] = chat_asking(client, "the weather, chat")

    def send(*results):
        return client.chat.completions.create(model="mol", tools=[CHAT_TOOL], messages=[
            *history, *({"role": "tool", "tool_call_id": i, "content": "sunny"}
                        for i in results)])

    invented = refused(lambda: client.chat.completions.create(model="mol", messages=[
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "call_L1_deadbeef", "content": "sunny"}]))
    assert invented["param"] == "messages[1].tool_call_id"
    assert "answers no open call" in invented["message"]
    wrong = refused(lambda: send("call_L1_deadbeef"))
    assert wrong["param"] == "messages[2].tool_call_id"
    assert call_id in wrong["message"]  # it names the calls that are open
    duplicate = refused(lambda: send(call_id, call_id))
    assert duplicate["param"] == "messages[3].tool_call_id"
    assert "a second time" in duplicate["message"]
    # Nothing of that reached the engine or changed the conversation.
    assert send(call_id).choices[0].message.content == "Answered from the results."
    assert transcript_problems(served.engine.requests) == []


def test_chat_results_must_answer_every_open_call(served):
    client = served.client()
    history, [first, second] = chat_asking(client, "two cities, chat")
    missing = refused(lambda: client.chat.completions.create(model="mol", messages=[
        *history, {"role": "tool", "tool_call_id": second, "content": "rainy"}]))
    assert missing["param"] == "messages" and first in missing["message"]
    answered = client.chat.completions.create(model="mol", messages=[
        *history, {"role": "tool", "tool_call_id": second, "content": "rainy"},
        {"role": "tool", "tool_call_id": first, "content": "sunny"}])
    assert answered.choices[0].message.content == "Answered from the results."


def test_responses_results_must_answer_the_open_calls(served):
    client = served.client()
    asked = client.responses.create(model="mol", input="the weather, responses",
                                    tools=[RESPONSES_TOOL])
    [call] = [item for item in asked.output if item.type == "function_call"]

    def send(*call_ids, previous=asked.id):
        return client.responses.create(
            model="mol", previous_response_id=previous, tools=[RESPONSES_TOOL],
            input=[{"type": "function_call_output", "call_id": i, "output": "sunny"}
                   for i in call_ids])

    invented = refused(lambda: client.responses.create(model="mol", input=[
        {"type": "function_call_output", "call_id": "call_L1_deadbeef", "output": "x"}]))
    assert invented["param"] == "input[0].call_id"
    assert refused(lambda: send("call_L1_deadbeef"))["param"] == "input[0].call_id"
    assert refused(lambda: send(call.call_id, call.call_id))["param"] == "input[1].call_id"
    done = send(call.call_id)
    assert done.output_text == "Answered from the results."
    # The turn is complete: nothing waits any more, so the same result again is refused.
    again = refused(lambda: send(call.call_id))
    assert again["param"] == "input[0].call_id"
    assert "no turn of this conversation waits" in again["message"]
    assert transcript_problems(served.engine.requests) == []
