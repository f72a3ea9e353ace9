"""Approvals through ``mol serve``: a call of an ``ask`` tool ends the reply with a request for
a person's approval (the Responses API's ``mcp_approval_request`` item, or a call of the
client's ``mol_approval`` tool on Chat Completions), and the next request's answer runs the
tool on the adapter that issued the call, or gives it the refusal. With the official
``openai`` client against a real server, the scripted engine behind it."""

from __future__ import annotations

import json
import time

import openai
import pytest

from mol.plugins import hookimpl
from mol.runtime.hooks import Rewrite
from mol.runtime.testing import ScriptedEngine

from .conftest import (
    HCP,
    chat_tool_call,
    sdk_stream_event,
    serve_app,
    settled_turns,
    tool_results,
    transcript_problems,
    turn_events,
)

APPROVAL_HCP = HCP.replace('tools.allow = ["shout", "hold"]',
                           'tools.allow = ["hold"]\ntools.ask = ["shout"]').replace(
    "expose_adapters = true", "expose_adapters = true\napproval_timeout_sec = 300")

PADDED = "fine" + " " * 4000 + "; echo PWNED \x1b[8m hidden"
"""Arguments whose end padding would push out of sight, with an escape sequence."""

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
when = "shout (please|again)"
times = -1
tool_calls = [{ name = "shout", arguments = { text = "hello" } }]
[[L1]]
when = "shout twice"
times = -1
tool_calls = [{ name = "shout", arguments = { text = "one" } },
              { name = "shout", arguments = { text = "two" } }]
[[L1]]
when = "shout padded"
times = -1
tool_calls = [{ name = "shout", arguments = { text = PADDED } }]
[[L1]]
when = "shout rewritten"
times = -1
tool_calls = [{ name = "shout", arguments = { text = "rewrite me" } }]
[[L1]]
when = "^HELLO$"
times = -1
reply = "I shouted."
[[L1]]
when = "^(ONE|TWO)$"
times = -1
reply = "I shouted twice."
[[L1]]
when = "was not run"
times = -1
reply = "I did not shout."
[[L1]]
times = -1
reply = "Anything else?"
""".replace("PADDED", json.dumps(PADDED))

class Guard:
    """A plugin whose ``mol_before_tool_call`` rewrites one call's arguments."""

    @hookimpl
    def mol_before_tool_call(self, call, context):
        if call.arguments.get("text") == "rewrite me":
            return Rewrite({"text": "rewritten"})
        return None


CHAT_TOOL = {"type": "function", "function": {"name": "mol_approval",
                                              "parameters": {"type": "object"}}}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("approvals")
    # One turn slot: a turn waiting for approval holds none (another conversation goes on).
    with ScriptedEngine.serve(SCRIPT) as engine, \
            serve_app(tmp, engine.base_url, hcp=APPROVAL_HCP, max_turns=1, queue_wait=5.0,
                      extra_plugins=(("guard", Guard()),)) as server:
        server.engine = engine
        yield server


def responses_final(client, stream: bool, **body):
    """The response (the completed one, when streamed: its events checked against the
    SDK's definitions)."""
    if not stream:
        return client.responses.create(model="mol", **body)
    events = list(client.responses.create(model="mol", stream=True, **body))
    for event in events:
        sdk_stream_event(event.model_dump(exclude_unset=True))
    [done] = [e for e in events if e.type == "response.completed"]
    items = [e.item for e in events if e.type == "response.output_item.done"]
    assert [i.model_dump() for i in items] == [i.model_dump() for i in done.response.output]
    return done.response


def asked(response):
    """The one ``mcp_approval_request`` of ``response``."""
    [request] = [item for item in response.output if item.type == "mcp_approval_request"]
    return request


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_approved_the_tool_runs_on_the_adapter_that_asked(served, stream):
    client = served.client()
    text = f"shout please ({stream})"
    ran = len(tool_results(served.engine))
    first = responses_final(client, stream, input=text)
    request = asked(first)
    assert (request.server_label, request.name, json.loads(request.arguments)) == (
        "mol", "shout", {"text": "hello"})
    assert request.id.startswith("call_L1_")
    assert first.status == "completed" and first.output_text == ""
    assert first.metadata["mol_adapter"] == "L1"
    assert len(tool_results(served.engine)) == ran  # nothing ran yet
    second = responses_final(client, stream, previous_response_id=first.id, input=[
        {"type": "mcp_approval_response", "approval_request_id": request.id,
         "approve": True}])
    assert second.output_text == "I shouted."
    assert second.metadata["mol_adapter"] == "L1"
    assert tool_results(served.engine)[-1] == "HELLO"
    events = turn_events(served.store, text)
    [approval] = [e for e in events if e["type"] == "approval"]
    assert (approval["tool"], approval["call_id"], approval["allow"]) == ("shout", request.id,
                                                                         True)
    # The turn goes on as any other, from the answer's response or the one that asked.
    third = client.responses.create(model="mol", previous_response_id=first.id, input="ok")
    assert third.output_text == "Anything else?"
    last = served.engine.requests_for("L1")[-1]["body"]["messages"]
    assert [m["role"] for m in last[-5:]] == ["user", "assistant", "tool", "assistant", "user"]
    assert transcript_problems(served.engine.requests) == []


def test_denied_the_adapter_reads_the_refusal_and_its_reason(served):
    client = served.client()
    first = client.responses.create(model="mol", input="shout please (deny)")
    second = client.responses.create(model="mol", previous_response_id=first.id, input=[
        {"type": "mcp_approval_response", "approval_request_id": asked(first).id,
         "approve": False, "reason": "too loud"}])
    assert second.output_text == "I did not shout."
    assert tool_results(served.engine)[-1] == (
        "Error: shout was not run: the user did not approve it: too loud.")
    [turn] = settled_turns(served.store, "shout please (deny)", 1)
    assert turn[2] == "complete"


def approval(request_id: str, approve: bool = True, **extra) -> dict:
    return {"type": "mcp_approval_response", "approval_request_id": request_id,
            "approve": approve, **extra}


def test_always_is_remembered_for_the_conversation_and_its_forks(served):
    client = served.client()
    first = client.responses.create(model="mol", input="shout please (always)")
    second = client.responses.create(model="mol", previous_response_id=first.id, input=[
        approval(asked(first).id, always=True)])
    assert second.output_text == "I shouted."
    # The next call of the tool in this conversation is not asked about: it runs.
    third = client.responses.create(model="mol", previous_response_id=second.id,
                                    input="shout again")
    assert third.output_text == "I shouted."
    assert [i.type for i in third.output] == ["message"]
    events = turn_events(served.store, "shout again")
    [told] = [e for e in events if e["type"] == "approval"]
    assert (told["allow"], told["always"], told["remembered"]) == (True, True, True)
    # Another conversation asks again.
    other = client.responses.create(model="mol", input="shout please (another)")
    assert asked(other).name == "shout"


def test_a_waiting_turn_holds_its_conversation_but_no_turn_slot(served):
    client = served.client()
    first = client.responses.create(model="mol", input="shout please (hold)")
    with pytest.raises(openai.ConflictError) as busy:
        client.responses.create(model="mol", previous_response_id=first.id, input="hello?")
    assert busy.value.body["code"] == "conversation_busy"
    assert "approval of shout" in busy.value.body["message"]
    assert 250 <= int(busy.value.response.headers["retry-after"]) <= 300
    # The server has one turn slot: another conversation's turn gets it meanwhile.
    assert client.responses.create(model="mol", input="meanwhile").output_text == (
        "Anything else?")
    done = client.responses.create(model="mol", previous_response_id=first.id,
                                   input=[approval(asked(first).id)])
    assert done.output_text == "I shouted."


def test_an_answer_given_twice_is_a_409_saying_how_the_request_ended(served):
    client = served.client()
    first = client.responses.create(model="mol", input="shout please (twice)")
    answer = [approval(asked(first).id, approve=False, reason="no")]
    client.responses.create(model="mol", previous_response_id=first.id, input=answer)
    with pytest.raises(openai.ConflictError) as ended:
        client.responses.create(model="mol", previous_response_id=first.id, input=answer)
    assert ended.value.body["code"] == "approval_ended"
    assert ended.value.body["param"] == "input[0].approval_request_id"
    assert "was denied: no" in ended.value.body["message"]


def test_bad_answers_are_400s_naming_the_field_and_the_turn_still_waits(served):
    client = served.client()
    first = client.responses.create(model="mol", input="shout please (bad answers)")
    request_id = asked(first).id

    def answer(item):
        return client.responses.create(model="mol", previous_response_id=first.id,
                                       input=[item])

    for item, param, says in [
            ({"type": "mcp_approval_response", "approval_request_id": request_id},
             "input[0].approve", "missing required field"),
            (approval(request_id, approve="yes"), "input[0].approve", "must be a boolean"),
            (approval(request_id, reason=7), "input[0].reason", "must be a string"),
            (approval(request_id, always="no"), "input[0].always", "must be a boolean"),
            ({"type": "mcp_approval_response", "approve": True},
             "input[0].approval_request_id", "missing required field"),
            (approval("call_L1_0123456789ab"), "input[0].approval_request_id",
             "answers no approval request the conversation waits for"),
            ({"type": "function_call_output", "call_id": request_id, "output": "sure"},
             "input[0].output", "must be the JSON answer of the approval request")]:
        with pytest.raises(openai.BadRequestError) as caught:
            answer(item)
        assert caught.value.body["param"] == param, caught.value.body
        assert says in caught.value.body["message"]
    assert answer(approval(request_id)).output_text == "I shouted."


def test_one_request_answering_an_approval_twice_is_a_400(served):
    client = served.client()
    first = client.responses.create(model="mol", input="shout please (double)")
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="mol", previous_response_id=first.id, input=[
            approval(asked(first).id), approval(asked(first).id)])
    assert caught.value.body["param"] == "input[1].approval_request_id"
    assert "a second time" in caught.value.body["message"]


def test_the_request_shows_the_whole_call_escaped(served):
    """The terminal prompt's rule over HTTP: every byte of the arguments (nothing cut, so
    padding cannot hide what runs), control characters escaped."""
    client = served.client()
    first = client.responses.create(model="mol", input="shout padded")
    request = asked(first)
    assert "echo PWNED" in request.arguments and "\x1b" not in request.arguments
    assert "\\u001b[8m hidden" in request.arguments
    assert json.loads(request.arguments) == {"text": PADDED}
    chat = client.chat.completions.create(model="mol", tools=[CHAT_TOOL], messages=[
        {"role": "user", "content": "shout padded (chat)"}])
    [call] = chat.choices[0].message.tool_calls
    assert "\x1b" not in call.function.arguments and "echo PWNED" in call.function.arguments
    assert json.loads(call.function.arguments)["arguments"] == {"text": PADDED}


def test_what_the_person_is_shown_is_what_runs(served):
    """A hook's rewrite comes first: the request shows the rewritten arguments, and those
    run."""
    client = served.client()
    first = client.responses.create(model="mol", input="shout rewritten")
    assert json.loads(asked(first).arguments) == {"text": "rewritten"}
    client.responses.create(model="mol", previous_response_id=first.id,
                            input=[approval(asked(first).id)])
    assert tool_results(served.engine)[-1] == "REWRITTEN"


def chat_ask(client, text: str, stream: bool = False):
    """The history after the reply that asks for an approval, and its one call."""
    return chat_tool_call(client, text, CHAT_TOOL, stream)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("approve", [True, False], ids=["approve", "deny"])
def test_chat_completions_with_the_mol_approval_tool(served, stream, approve):
    client = served.client()
    ran = len(tool_results(served.engine))
    history, call_id, name, arguments = chat_ask(client, f"shout please (chat {stream} "
                                                 f"{approve})", stream)
    assert name == "mol_approval" and call_id.startswith("call_L1_")
    assert json.loads(arguments) == {"server_label": "mol", "name": "shout",
                                     "arguments": {"text": "hello"}}
    assert len(tool_results(served.engine)) == ran
    decision = {"approve": approve} if approve else {"approve": False, "reason": "hush"}
    reply = client.chat.completions.create(model="mol", tools=[CHAT_TOOL], messages=[
        *history, {"role": "tool", "tool_call_id": call_id, "content": json.dumps(decision)}])
    assert reply.choices[0].message.content == ("I shouted." if approve else
                                                "I did not shout.")
    assert tool_results(served.engine)[-1] == (
        "HELLO" if approve else "Error: shout was not run: the user did not approve it: hush.")
    # The mol_approval call never reached the engine: the adapter saw its own call.
    assert "mol_approval" not in json.dumps(served.engine.requests)
    assert transcript_problems(served.engine.requests) == []


def test_chat_completions_bad_decisions_are_400s_naming_the_content(served):
    client = served.client()
    history, call_id, _, _ = chat_ask(client, "shout please (chat bad)")

    def answer(content: str):
        return client.chat.completions.create(model="mol", tools=[CHAT_TOOL], messages=[
            *history, {"role": "tool", "tool_call_id": call_id, "content": content}])

    for content, says in [("yes", "must be the JSON answer"),
                          (json.dumps({"approve": "yes"}), "approve must be a boolean"),
                          (json.dumps({"approve": True, "aprove": 1}), "unknown field 'aprove'"),
                          (json.dumps({"approve": True, "always": 1}),
                           "always must be a boolean")]:
        with pytest.raises(openai.BadRequestError) as caught:
            answer(content)
        assert caught.value.body["param"] == "messages[2].content"
        assert says in caught.value.body["message"]
    assert answer(json.dumps({"approve": True})).choices[0].message.content == "I shouted."


def test_without_the_tool_a_chat_client_cannot_approve_and_the_call_is_refused(served):
    reply = served.client().chat.completions.create(model="mol", messages=[
        {"role": "user", "content": "shout please (no tool)"}])
    assert reply.choices[0].message.content == "I did not shout."
    assert "nobody can approve" in tool_results(served.engine)[-1]


def test_no_answer_within_the_timeout_denies(tmp_path):
    hcp = APPROVAL_HCP.replace("approval_timeout_sec = 300", "approval_timeout_sec = 1")
    with ScriptedEngine.serve(SCRIPT) as engine, \
            serve_app(tmp_path, engine.base_url, hcp=hcp) as served:
        client = served.client()
        first = client.responses.create(model="mol", input="shout please (late)")
        started = time.monotonic()
        deadline = started + 30
        while not any("nobody answered" in r for r in tool_results(engine)):
            assert time.monotonic() < deadline, "the wait did not end"
            time.sleep(0.05)
        assert time.monotonic() - started >= 0.5
        assert tool_results(engine)[-1] == ("Error: shout was not run: the user did not "
                                            "approve it: nobody answered within 1 s.")
        while settled_turns(served.store, "shout please (late)", 1)[0][2] != "complete":
            assert time.monotonic() < deadline, "the turn did not complete"
            time.sleep(0.05)
        with pytest.raises(openai.ConflictError) as caught:
            client.responses.create(model="mol", previous_response_id=first.id,
                                    input=[approval(asked(first).id)])
        assert caught.value.body["code"] == "approval_ended"
        assert "nobody answered within 1 s" in caught.value.body["message"]
        # The response that asked names the turn's end now: the conversation goes on.
        after = client.responses.create(model="mol", previous_response_id=first.id,
                                        input="ok then")
        assert after.output_text == "Anything else?"
        assert "I did not shout." in json.dumps(engine.requests_for("L1")[-1]["body"])


@pytest.mark.anyio
@pytest.mark.parametrize("approve", [True, False], ids=["approve", "deny"])
async def test_the_agents_sdk_answers_with_its_approval_callback(served, approve):
    """The OpenAI Agents SDK, unchanged: an ``Agent`` with a ``HostedMCPTool`` labelled
    ``mol`` and an ``on_approval_request`` callback; the run replays the whole input (the
    approval request and the SDK's answer included) and completes."""
    import agents

    seen = []

    def callback(request: agents.MCPToolApprovalRequest) -> agents.MCPToolApprovalFunctionResult:
        seen.append((request.data.server_label, request.data.name,
                     json.loads(request.data.arguments)))
        return {"approve": True} if approve else {"approve": False, "reason": "not now"}

    tag = f"shout please (agents {approve})"
    async with served.async_client() as client:
        agent = agents.Agent(
            name="helper", instructions="Be brief.",
            model=agents.OpenAIResponsesModel(model="mol", openai_client=client),
            tools=[agents.HostedMCPTool(tool_config={"type": "mcp", "server_label": "mol",
                                                     "server_url": "https://mol.invalid"},
                                        on_approval_request=callback)])
        result = await agents.Runner.run(agent, tag,
                                         run_config=agents.RunConfig(tracing_disabled=True))
    assert seen == [("mol", "shout", {"text": "hello"})]
    assert result.final_output == ("I shouted." if approve else "I did not shout.")
    assert tool_results(served.engine)[-1] == (
        "HELLO" if approve else "Error: shout was not run: the user did not approve it: "
        "not now.")
    # One conversation: the SDK's replay continued the turn that asked.
    rows = settled_turns(served.store, tag, 1)
    assert [row[2] for row in rows] == ["complete"]


def test_the_anthropic_messages_api_declares_the_tool_too(served):
    """``/v1/messages`` with the official ``anthropic`` SDK: the ``mol_approval`` tool is
    declared, asked for as a ``tool_use`` and answered by its ``tool_result``."""
    import anthropic

    tool = {"name": "mol_approval", "input_schema": {"type": "object"}}
    with anthropic.Anthropic(base_url=served.url.removesuffix("/v1"), api_key=served.key,
                             max_retries=0) as client:
        messages = [{"role": "user", "content": "shout please (messages)"}]
        first = client.messages.create(model="mol", max_tokens=200, tools=[tool],
                                       messages=messages)
        [use] = first.content
        assert (first.stop_reason, use.type, use.name) == ("tool_use", "tool_use",
                                                          "mol_approval")
        assert use.input == {"server_label": "mol", "name": "shout",
                             "arguments": {"text": "hello"}}
        messages += [first.to_param(), {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": use.id,
             "content": json.dumps({"approve": True})}]}]
        second = client.messages.create(model="mol", max_tokens=200, tools=[tool],
                                        messages=messages)
    assert second.content[0].text == "I shouted."
    assert tool_results(served.engine)[-1] == "HELLO"
