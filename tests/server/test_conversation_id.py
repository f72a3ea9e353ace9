"""Chat Completions requests naming their conversation by ``X-Conversation-Id`` (echoed
back), the reasoning effort as the answer hop's thinking switch, and the engine affinity
header, through a real ``mol serve`` app and the scripted engine."""

from __future__ import annotations

import httpx
import pytest

from mol.runtime.testing import ScriptedEngine

from .conftest import HCP, KEY, answers, serve_app

SCRIPT = """
[[L0]]
constrained = true
times = -1
reply = "L0"
[[L0]]
constrained = false
when = "^User: "
times = -1
reply = "a summary"
[[L0]]
constrained = false
times = -1
reply = "Hi."
"""
AFFINITY = HCP.replace("max_retries = 2\n", 'max_retries = 2\naffinity_header = "x-session-affinity"\n')
ID = "client-chosen.id_0001"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("conversation-id")
    with ScriptedEngine.serve(SCRIPT) as engine, \
            serve_app(tmp, engine.base_url, hcp=AFFINITY) as server:
        server.engine = engine
        yield server


def chat(served, text: str, conversation: str | None = None, **body) -> httpx.Response:
    headers = {"Authorization": f"Bearer {KEY}"}
    if conversation is not None:
        headers["X-Conversation-Id"] = conversation
    return httpx.post(f"{served.url}/chat/completions", headers=headers, timeout=30, json={
        "model": "mol", "messages": [{"role": "user", "content": text}], **body})


def test_a_named_conversation_goes_on_without_its_history(served):
    engine = served.engine
    first = chat(served, "hello, I am Ada", ID)
    assert first.status_code == 200 and first.headers["x-conversation-id"] == ID
    second = chat(served, "what is my name?", ID)  # no history sent: the id names it
    assert second.headers["x-conversation-id"] == ID
    view = answers(engine, "L0")[-1]["messages"]
    assert [m["content"] for m in view if m["role"] in ("user", "assistant")] == [
        "hello, I am Ada", "Hi.", "what is my name?"]
    other = chat(served, "what is my name?", "another-client-id-02")
    assert other.headers["x-conversation-id"] == "another-client-id-02"
    view = answers(engine, "L0")[-1]["messages"]
    assert [m["content"] for m in view if m["role"] == "user"] == ["what is my name?"]
    # Every engine request of the named conversation carried the same affinity value.
    values = {r["headers"]["x-session-affinity"] for r in engine.requests
              if "Ada" in str(r["body"]) or "my name" in str(r["body"])}
    assert values == {f"xconv_{ID}", "xconv_another-client-id-02"}


def test_a_streamed_reply_echoes_the_id(served):
    named = "streamed-conversation-03"
    assert chat(served, "hello, I am Bo", named).status_code == 200
    with httpx.stream("POST", f"{served.url}/chat/completions", timeout=30,
                      headers={"Authorization": f"Bearer {KEY}", "X-Conversation-Id": named},
                      json={"model": "mol", "stream": True,
                            "messages": [{"role": "user", "content": "stream it"}]}) as reply:
        assert reply.status_code == 200 and reply.headers["x-conversation-id"] == named
        assert "[DONE]" in reply.read().decode()
    view = answers(served.engine, "L0")[-1]["messages"]
    assert [m["content"] for m in view if m["role"] == "user"] == ["hello, I am Bo",
                                                                    "stream it"]


def test_without_the_header_nothing_is_echoed(served):
    reply = chat(served, "hello")
    assert reply.status_code == 200 and "x-conversation-id" not in reply.headers


@pytest.mark.parametrize("bad", ["short", "has space in it, yes", "x" * 129, "slash/in/the/id-0"])
def test_a_bad_id_is_a_400_naming_the_header(served, bad):
    reply = chat(served, "hello", bad)
    assert reply.status_code == 400
    assert reply.json()["error"]["param"] == "X-Conversation-Id"


@pytest.mark.parametrize("effort, thinking", [
    ("none", False), ("minimal", False), ("low", True), ("medium", True), ("high", True)])
def test_the_reasoning_effort_switches_the_answer_hops_thinking(served, effort, thinking):
    engine = served.engine
    before = len(engine.requests)
    assert chat(served, f"think {effort}", reasoning_effort=effort).status_code == 200
    [answer] = [r for r in engine.requests[before:] if r["constraint"] is None
                and r["body"]["messages"][-1]["content"] == f"think {effort}"]
    body = answer["body"]
    assert body["chat_template_kwargs"] == {"enable_thinking": thinking}
    assert body["reasoning_effort"] == effort and answer["thinking"] is thinking
    route = next(r["body"] for r in engine.requests[before:] if r["constraint"])
    assert route["chat_template_kwargs"] == {"enable_thinking": False}  # the route's own
