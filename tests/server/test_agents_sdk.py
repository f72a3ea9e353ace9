"""The OpenAI Agents SDK (``openai-agents``) against ``mol serve``, unchanged: an ``Agent``
with a ``@function_tool``, ``Runner.run`` and ``Runner.run_streamed``, over
``OpenAIResponsesModel`` (``/v1/responses``, the whole input replayed on each request, no
``previous_response_id``) and over ``OpenAIChatCompletionsModel`` (``/v1/chat/completions``),
two turns each. Each run of two turns is one stored conversation, whatever the replays, and
every request the engine saw is a valid Chat Completions transcript."""

from __future__ import annotations

import agents
import pytest

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
reply = "You are welcome."

[[L1]]
when = "weather"
times = -1
tool_calls = [{ name = "get_weather", arguments = { city = "Paris" } }]
[[L1]]
when = "^sunny"
times = -1
reply = "It is sunny in Paris."
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("agents")
    with ScriptedEngine.serve(SCRIPT) as engine, serve_app(tmp, engine.base_url) as server:
        server.engine = engine
        yield server


@agents.function_tool
def get_weather(city: str) -> str:
    """The weather of a city."""
    return f"sunny, 24 C in {city}"


async def run_turn(agent, items, streamed: bool):
    config = agents.RunConfig(tracing_disabled=True)
    if not streamed:
        return await agents.Runner.run(agent, items, run_config=config)
    result = agents.Runner.run_streamed(agent, items, run_config=config)
    kinds = {event.type async for event in result.stream_events()}
    assert "raw_response_event" in kinds  # it did stream
    return result


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
@pytest.mark.parametrize("api", ["responses", "chat"])
async def test_an_agent_with_a_function_tool_over_two_turns(served, api, streamed):
    tag = f"{api}-{'streamed' if streamed else 'run'}"
    before = len(served.engine.requests)
    async with served.async_client() as client:
        model = (agents.OpenAIResponsesModel if api == "responses" else
                 agents.OpenAIChatCompletionsModel)(model="mol", openai_client=client)
        agent = agents.Agent(name="helper", instructions="Be brief.", model=model,
                             tools=[get_weather])
        first = await run_turn(agent, f"what is the weather in Paris? ({tag})", streamed)
        assert first.final_output == "It is sunny in Paris."
        calls = [i for i in first.new_items if i.type == "tool_call_output_item"]
        assert [c.output for c in calls] == ["sunny, 24 C in Paris"]
        # The second turn: the SDK sends the whole history again, plus the new message.
        items = [*first.to_input_list(), {"role": "user", "content": f"thanks ({tag})"}]
        second = await run_turn(agent, items, streamed)
        assert second.final_output == "You are welcome."

    requests = served.engine.requests[before:]
    assert requests and all(r["status"] == 200 for r in requests)
    assert transcript_problems(requests) == []
    # The tool result reached the adapter that called the tool, after its call.
    answered = next(r["body"]["messages"] for r in requests
                    if r["adapter"] == "L1" and r["body"]["messages"][-1]["role"] == "tool")
    assert answered[-2]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert answered[-1]["content"] == "sunny, 24 C in Paris"
    # One stored conversation for the run, its two turns complete with their summaries.
    rows = settled_turns(served.store, f"%({tag})", 2)
    assert len({row[0] for row in rows}) == 1, rows
    assert [row[1:] for row in rows] == [(0, "complete", "L1", "[L1] summary of the turn"),
                                         (1, "complete", "L0", "[L0] summary of the turn")]
