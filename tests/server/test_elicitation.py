"""MCP elicitation through ``mol serve``: a client that declares the ``mcp_elicitation`` tool
gets an MCP server's request for input as a call of it, answers it in the next request, and
that request's reply carries the rest of the turn. Against a real MCP server (the scripted
test server over stdio, whose tools echo the answer they got into their result, which the
scripted engine's next request shows), with the official ``openai`` client."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import openai
import pytest

from mol.runtime.testing import ScriptedEngine

from .conftest import (
    HCP,
    chat_tool_call,
    serve_app,
    settled_turns,
    tool_results,
    transcript_problems,
    turn_events,
)

MCP_SERVER = Path(__file__).parents[1] / "runtime" / "mcp" / "servers" / "scripted_server.py"

ELICIT_HCP = HCP.replace('tools.allow = ["shout", "hold"]',
                         'tools.allow = ["mcp__*"]\nmcp_servers = ["s", "d"]') + "".join(f"""
[mcp_servers.{name}]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(MCP_SERVER))}, "--legacy"]
startup_timeout_sec = 60
elicitation = "{policy}"
""" for name, policy in [("s", "ask"), ("d", "decline")])

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
when = "form please"
times = -1
tool_calls = [{ name = "mcp__s__ask_user", arguments = {} }]
[[L1]]
when = "form from d"
times = -1
tool_calls = [{ name = "mcp__d__ask_user", arguments = {} }]
[[L1]]
when = "url please"
times = -1
tool_calls = [{ name = "mcp__s__ask_url", arguments = {} }]
[[L1]]
when = "accept: \\\\{'name': 'Ada', 'color': 'blue'\\\\}"
times = -1
reply = "Hello Ada, blue it is."
[[L1]]
when = "^(decline|cancel): None"
times = -1
reply = "No name, then."
[[L1]]
when = "^url "
times = -1
reply = "Done with the page."
[[L1]]
times = -1
reply = "Anything else?"
"""

PARAMETERS = {"type": "object", "properties": {"server": {"type": "string"}}}
CHAT_TOOL = {"type": "function", "function": {"name": "mcp_elicitation",
                                              "parameters": PARAMETERS}}
RESPONSES_TOOL = {"type": "function", "name": "mcp_elicitation", "parameters": PARAMETERS}
ACCEPT = json.dumps({"action": "accept", "content": {"name": "Ada"}})


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("elicitation")
    # One turn slot, and a short wait for it: a suspended turn holding it would show.
    with ScriptedEngine.serve(SCRIPT) as engine, \
            serve_app(tmp, engine.base_url, hcp=ELICIT_HCP, max_turns=1,
                      queue_wait=5.0) as server:
        server.engine = engine
        yield server


def check_form_call(call_id: str, name: str, arguments: str) -> None:
    assert name == "mcp_elicitation"
    assert call_id.startswith("call_L1_")
    args = json.loads(arguments)
    assert (args["server"], args["mode"], args["message"]) == ("s", "form",
                                                               "What is your name?")
    assert set(args["requestedSchema"]["properties"]) == {"name", "color"}
    assert args["requestedSchema"]["required"] == ["name"]


def chat_ask(client, text: str = "form please", stream: bool = False):
    """The history after the first reply, and its one ``mcp_elicitation`` call."""
    return chat_tool_call(client, text, CHAT_TOOL, stream)


def chat_answer(client, history, call_id: str, answer: str, stream: bool = False):
    messages = [*history, {"role": "tool", "tool_call_id": call_id, "content": answer}]
    if not stream:
        reply = client.chat.completions.create(model="mol", messages=messages,
                                               tools=[CHAT_TOOL])
        return reply.choices[0].message.content, reply.choices[0].finish_reason
    text, finish = "", None
    for chunk in client.chat.completions.create(model="mol", messages=messages,
                                                tools=[CHAT_TOOL], stream=True):
        text += chunk.choices[0].delta.content or ""
        finish = chunk.choices[0].finish_reason or finish
    return text, finish


@pytest.mark.parametrize(("stream", "answer_stream"), [(False, False), (True, True),
                                                     (False, True), (True, False)],
                         ids=["json", "stream", "json-then-stream", "stream-then-json"])
def test_chat_completions_client_answers_the_form(served, stream, answer_stream):
    """The answering request's ``stream`` decides how the rest of the turn is sent."""
    client = served.client()
    history, call_id, name, arguments = chat_ask(client, f"form please ({stream}, "
                                                 f"{answer_stream})", stream)
    check_form_call(call_id, name, arguments)
    text, finish = chat_answer(client, history, call_id, ACCEPT, answer_stream)
    assert (text, finish) == ("Hello Ada, blue it is.", "stop")
    # The MCP tool got the client's content, with the schema's default filled in.
    assert tool_results(served.engine)[-1] == "accept: {'name': 'Ada', 'color': 'blue'}"
    # The turn's log tells of it (not of the content: that stays with the server).
    events = turn_events(served.store, f"form please ({stream}, {answer_stream})")
    [elicited] = [e for e in events if e["type"] == "elicitation"]
    assert (elicited["server"], elicited["mode"], elicited["action"]) == ("s", "form",
                                                                          "accept")
    # The reply continues the conversation as any other: the next turn extends its view.
    history += [{"role": "tool", "tool_call_id": call_id, "content": ACCEPT},
                {"role": "assistant", "content": text}]
    follow = client.chat.completions.create(model="mol", messages=[
        *history, {"role": "user", "content": "thanks"}])
    assert follow.choices[0].message.content == "Anything else?"
    last = served.engine.requests_for("L1")[-1]["body"]["messages"]
    assert [m["role"] for m in last[-3:]] == ["tool", "assistant", "user"]
    assert "Hello Ada" in last[-2]["content"]
    # The elicitation call never reached the engine; its transcripts stay valid.
    assert "mcp_elicitation" not in json.dumps(served.engine.requests)
    assert transcript_problems(served.engine.requests) == []


def responses_final(client, stream: bool, **body):
    """The response (the completed one, when streamed)."""
    if not stream:
        return client.responses.create(model="mol", tools=[RESPONSES_TOOL], **body)
    events = list(client.responses.create(model="mol", tools=[RESPONSES_TOOL], stream=True,
                                          **body))
    [done] = [e for e in events if e.type == "response.completed"]
    return done.response


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_responses_client_answers_the_form(served, stream):
    client = served.client()
    first = responses_final(client, stream, input=f"form please (responses {stream})")
    [call] = [item for item in first.output if item.type == "function_call"]
    check_form_call(call.call_id, call.name, call.arguments)
    second = responses_final(client, stream, previous_response_id=first.id, input=[
        {"type": "function_call_output", "call_id": call.call_id, "output": ACCEPT}])
    assert second.output_text == "Hello Ada, blue it is."
    assert second.metadata["mol_adapter"] == "L1"
    assert tool_results(served.engine)[-1] == "accept: {'name': 'Ada', 'color': 'blue'}"
    third = client.responses.create(model="mol", previous_response_id=second.id,
                                    input="thanks")
    assert third.output_text == "Anything else?"
    last = served.engine.requests_for("L1")[-1]["body"]["messages"]
    assert "Hello Ada" in last[-2]["content"]
    assert transcript_problems(served.engine.requests) == []


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_decline_and_cancel_reach_the_mcp_server(served, action):
    client = served.client()
    history, call_id, _, _ = chat_ask(client, f"form please ({action})")
    text, _ = chat_answer(client, history, call_id, json.dumps({"action": action}))
    assert text == "No name, then."
    assert tool_results(served.engine)[-1] == f"{action}: None"
    with pytest.raises(openai.ConflictError) as caught:  # answered already
        chat_answer(client, history, call_id, json.dumps({"action": action}))
    assert caught.value.body["code"] == "elicitation_ended"


def test_a_malformed_answer_is_a_400_and_the_turn_still_waits(served):
    client = served.client()
    first = client.responses.create(model="mol", input="form please (malformed)",
                                    tools=[RESPONSES_TOOL])
    [call] = [item for item in first.output if item.type == "function_call"]

    def answer(output: str):
        return client.responses.create(model="mol", previous_response_id=first.id,
                                       tools=[RESPONSES_TOOL], input=[
            {"type": "function_call_output", "call_id": call.call_id, "output": output}])

    for bad, says in [("yes", "must be the JSON answer"),
                      (json.dumps({"action": "maybe"}), "action must be one of"),
                      (json.dumps({"action": "accept", "content": {"name": 7}}),
                       "does not answer the requested schema")]:
        with pytest.raises(openai.BadRequestError) as caught:
            answer(bad)
        assert caught.value.body["param"] == "input[0].output"
        assert says in caught.value.body["message"]
    # While it waits, the conversation is busy for a new turn (until the wait ends at most).
    with pytest.raises(openai.ConflictError) as busy:
        client.responses.create(model="mol", previous_response_id=first.id, input="hello?")
    assert busy.value.body["code"] == "conversation_busy"
    assert 1 <= int(busy.value.response.headers["retry-after"]) <= 300
    assert answer(ACCEPT).output_text == "Hello Ada, blue it is."


def test_an_answer_leaving_out_fields_with_defaults_gets_them_before_the_check():
    """SEP-1034: what the client leaves out takes the schema's default, required or not; a
    required field without one is still missing."""
    from mol.core.errors import ConversationError
    from mol.server.turns.elicitation import parse_answer

    params = {"requestedSchema": {"type": "object", "required": ["age", "name"], "properties": {
        "age": {"type": "integer", "default": 30}, "name": {"type": "string"},
        "status": {"type": "string", "enum": ["active", "idle"], "default": "active"}}}}
    accepted = parse_answer(json.dumps({"action": "accept", "content": {"name": "Ada"}}),
                            params, "input[0].output")
    assert accepted == {"action": "accept",
                        "content": {"name": "Ada", "age": 30, "status": "active"}}
    with pytest.raises(ConversationError, match='missing required "name"') as caught:
        parse_answer(json.dumps({"action": "accept", "content": {}}), params, "input[0].output")
    assert caught.value.field == "input[0].output"


def test_without_the_tool_the_request_is_declined(served):
    reply = served.client().chat.completions.create(model="mol", messages=[
        {"role": "user", "content": "form please (no tool)"}])
    assert reply.choices[0].message.content == "No name, then."
    assert tool_results(served.engine)[-1] == "decline: None"


def test_a_server_configured_to_decline_never_reaches_the_client(served):
    reply = served.client().chat.completions.create(model="mol", tools=[CHAT_TOOL], messages=[
        {"role": "user", "content": "form from d"}])
    assert (reply.choices[0].message.content, reply.choices[0].finish_reason) == (
        "No name, then.", "stop")
    assert tool_results(served.engine)[-1] == "decline: None"


def test_url_mode_reaches_the_client_with_the_url(served):
    client = served.client()
    history, call_id, name, arguments = chat_ask(client, "url please")
    assert name == "mcp_elicitation"
    assert json.loads(arguments) == {"server": "s", "mode": "url",
                                     "message": "Sign in to the store",
                                     "url": "https://store.example/sign-in?s=7",
                                     "elicitationId": "elic-7"}
    text, _ = chat_answer(client, history, call_id, json.dumps({"action": "accept"}))
    assert text == "Done with the page."
    assert tool_results(served.engine)[-1] == "url accept"


def test_an_unanswered_elicitation_is_declined_after_the_timeout(tmp_path):
    with ScriptedEngine.serve(SCRIPT) as engine, \
            serve_app(tmp_path, engine.base_url, hcp=ELICIT_HCP,
                      elicitation_timeout=1.0) as served:
        client = served.client()
        history, call_id, _, _ = chat_ask(client, "form please (late)")
        started = time.monotonic()
        [turn] = settled_turns(served.store, "form please (late)", 1)
        assert turn[2] == "complete"
        assert time.monotonic() - started < 30
        assert tool_results(engine)[-1] == "decline: None"
        with pytest.raises(openai.ConflictError) as caught:
            chat_answer(client, history, call_id, ACCEPT)
        assert caught.value.body["code"] == "elicitation_ended"
        assert "no answer within 1 s" in caught.value.body["message"]


def test_a_suspended_turn_holds_no_turn_slot(served):
    client = served.client()
    history, call_id, _, _ = chat_ask(client, "form please (slot)")
    # The server has one slot: another conversation's turn gets it while this one waits.
    other = client.chat.completions.create(model="mol", messages=[
        {"role": "user", "content": "meanwhile, hello"}])
    assert other.choices[0].message.content == "Anything else?"
    assert chat_answer(client, history, call_id, ACCEPT)[0] == "Hello Ada, blue it is."


def test_shutdown_cancels_a_suspended_elicitation(tmp_path):
    with ScriptedEngine.serve(SCRIPT) as engine:
        with serve_app(tmp_path, engine.base_url, hcp=ELICIT_HCP) as served:
            chat_ask(served.client(), "form please (shutdown)")
        # The drain cancelled the elicitation: the MCP tool learnt so, the turn finished.
        assert tool_results(engine)[-1] == "cancel: None"
        [turn] = settled_turns(served.store, "form please (shutdown)", 1, timeout=1)
        assert turn[2] == "complete"
