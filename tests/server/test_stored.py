"""The model and stored-response routes through the official client: ``models.retrieve``,
``responses.input_items.list``, ``responses.delete`` and ``responses.cancel`` (a turn in
flight stops cleanly: the stream ends with ``response.failed``, the turn is stored as
interrupted, and the conversation goes on)."""

from __future__ import annotations

import anyio
import openai
import pytest

from mol.runtime.testing import ScriptedEngine

from .conftest import serve_app, settled_turns, transcript_problems

SCRIPT = """
[[L0]]
constrained = true
when = "slow"
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
times = -1
reply = "Noted."

[[L1]]
when = "slow"
delay = 60
times = -1
reply = "This never arrives."
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("stored")
    with ScriptedEngine.serve(SCRIPT) as engine, serve_app(tmp, engine.base_url) as server:
        server.engine = engine
        yield server


def test_models_retrieve(served):
    client = served.client()
    assert client.models.retrieve("mol").id == "mol"
    assert client.models.retrieve("L2").id == "L2"  # expose_adapters
    with pytest.raises(openai.NotFoundError) as caught:
        client.models.retrieve("gpt-4")
    assert caught.value.body["code"] == "model_not_found"


def test_input_items_list_pages_through_the_request_input(served):
    client = served.client()
    response = client.responses.create(model="mol", input=[
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "input_text", "text": "the first item"}]},
        {"role": "assistant", "content": "an earlier answer"},
        {"role": "user", "content": "the last item"}])
    assert response.output_text == "Noted."
    items = client.responses.input_items.list(response.id, order="asc")
    assert [i.role for i in items.data] == ["developer", "user", "assistant", "user"]
    assert items.data[-1].content[0].text == "the last item"
    assert items.data[2].content[0].type == "output_text"
    newest = client.responses.input_items.list(response.id, limit=1)
    assert [i.id for i in newest.data] == [items.data[-1].id] and newest.has_more
    rest = client.responses.input_items.list(response.id, after=newest.data[0].id)
    assert [i.id for i in rest.data] == [i.id for i in reversed(items.data[:-1])]
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.input_items.list(response.id, limit=500)
    assert caught.value.body["param"] == "limit"


def test_delete_forgets_a_stored_response(served):
    client = served.client()
    response = client.responses.create(model="mol", input="to be forgotten")
    client.responses.delete(response.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id)
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(model="mol", input="more", previous_response_id=response.id)
    assert caught.value.body["param"] == "previous_response_id"
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(response.id)


@pytest.mark.anyio
async def test_cancel_stops_a_turn_in_flight(served):
    async with served.async_client() as client, served.async_client() as other:
        stream = await client.responses.create(model="mol", input="a slow one, please",
                                               stream=True)
        kinds = []
        with anyio.fail_after(30):
            async for event in stream:
                kinds.append(event.type)
                if event.type == "response.in_progress":
                    cancelled = await other.responses.cancel(event.response.id)
                    assert cancelled.status == "cancelled"
                if event.type == "response.failed":
                    assert event.response.status == "cancelled"
        assert kinds[-1] == "response.failed"
        with pytest.raises(openai.NotFoundError):  # over, and a cancelled response is not kept
            await other.responses.cancel(cancelled.id)
        first = await client.responses.create(model="mol", input="a quick one")
        with pytest.raises(openai.BadRequestError) as caught:
            await other.responses.cancel(first.id)
        assert "already completed" in caught.value.body["message"]
    [(_, _, status, adapter, _)] = settled_turns(served.store, "a slow one, please", 1)
    assert (status, adapter) == ("interrupted", "L1")
    assert transcript_problems(served.engine.requests) == []
