"""LangChain's ``ChatOpenAI`` with ``bind_tools`` against ``mol serve``, unchanged. The
engine emits compact argument JSON (``{"city":"Paris"}``); LangChain parses it and sends it
back re-serialized (``{"city": "Paris"}``). The request still continues the stored
conversation in place: the same session, the waiting turn completed with its summary, the
next turn after it, and every engine request a valid transcript."""

from __future__ import annotations

import json

import httpx
import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from mol.runtime.testing import ScriptedEngine

from .conftest import serve_app, settled_turns, transcript_problems

pytestmark = pytest.mark.slow

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
reply = "summary of the turn"
[[L0]]
constrained = false
times = -1
reply = "Glad to help."

[[L1]]
when = "weather"
times = -1
tool_calls = [{ name = "get_weather", arguments = '{"city":"Paris","days":[1,2]}' }]
[[L1]]
when = "^sunny"
times = -1
reply = "It is sunny in Paris."
"""


@tool
def get_weather(city: str, days: list[int]) -> str:
    """The weather of a city over the next days."""
    return f"sunny in {city} for days {days}"


@pytest.fixture
def served(tmp_path):
    with ScriptedEngine.serve(SCRIPT) as engine, serve_app(tmp_path, engine.base_url) as server:
        server.engine = engine
        yield server


def test_bind_tools_round_trip_continues_the_conversation_in_place(served):
    resent = []  # the tool-call arguments LangChain sends back, as bytes on the wire

    def record(request: httpx.Request) -> None:
        for message in json.loads(request.content or b"{}").get("messages", []):
            resent.extend(c["function"]["arguments"] for c in message.get("tool_calls") or [])

    client = httpx.Client(event_hooks={"request": [record]}, timeout=60)
    model = ChatOpenAI(model="mol", base_url=served.url, api_key=served.key, max_retries=0,
                       http_client=client).bind_tools([get_weather])
    history = [HumanMessage("what is the weather in Paris?")]
    asked = model.invoke(history)
    [call] = asked.tool_calls
    assert call["name"] == "get_weather" and call["args"] == {"city": "Paris", "days": [1, 2]}
    history += [asked, ToolMessage(get_weather.invoke(call["args"]), tool_call_id=call["id"])]
    answered = model.invoke(history)
    assert answered.content == "It is sunny in Paris."
    history += [answered, HumanMessage("thanks a lot")]
    assert model.invoke(history).content == "Glad to help."
    client.close()

    requests = served.engine.requests
    assert all(r["status"] == 200 for r in requests)
    assert transcript_problems(requests) == []
    # LangChain re-serialized the arguments; the adapter's view keeps the bytes it emitted.
    assert resent == ['{"city": "Paris", "days": [1, 2]}'] * 2
    engine_sent = next(r["body"]["messages"] for r in requests
                       if r["adapter"] == "L1" and r["body"]["messages"][-1]["role"] == "tool")
    assert engine_sent[-2]["tool_calls"][0]["function"]["arguments"] == \
        '{"city":"Paris","days":[1,2]}'
    assert engine_sent[-1]["content"] == "sunny in Paris for days [1, 2]"
    rows = settled_turns(served.store, "%", 2)
    assert len({row[0] for row in rows}) == 1, rows  # one session, continued in place
    assert [row[1:] for row in rows] == [(0, "complete", "L1", "[L1] summary of the turn"),
                                         (1, "complete", "L0", "[L0] summary of the turn")]
