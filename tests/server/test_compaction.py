"""Compaction through ``mol serve`` with the official ``openai`` client: long conversations
on both APIs fit a 2048-token window, ``responses.compact`` and the ``compaction`` item,
``context_management`` and its stream event, a forged item refused."""

from __future__ import annotations

import random

import openai
import pytest

from mol.runtime.testing import ScriptedEngine

from .conftest import hcp_text, serve_app, transcript_problems

WINDOW = 2048

SCRIPT = """
[[L0]]
constrained = true
when = "act"
times = -1
reply = "L1"
[[L0]]
constrained = true
times = -1
reply = "L0"
[[L0]]
when = "conversation is about to be shortened"
times = -1
reply = "Summary: a long chat about Greek letters."
[[L0]]
constrained = false
when = "^User: "
times = -1
reply = "summary of the turn"
[[L0]]
times = -1
reply = "Chatting along."
[[L1]]
when = "conversation is about to be shortened"
times = -1
reply = "Summary: shouted Greek letters."
[[L1]]
when = "^please act"
times = -1
tool_calls = [{ name = "shout", arguments = { text = "done" } }]
[[L1]]
times = -1
reply = "Acted."
"""

HCP = hcp_text("""\
[engine]
api_base = "http://127.0.0.1:9/v1"
routing_constraint = "structured_outputs"
max_retries = 0
[adapters.L0]
prompt = "You chat."
[adapters.L1]
prompt = "You act."
tools.allow = ["shout"]
[adapters.L2]
prompt = "You code."
[adapters.L3]
prompt = "You draw."
[session]
store = "sqlite:///{store}"
""", name="served")


def turns(count: int) -> list[str]:
    rng = random.Random(3)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    return [f"{['please act', 'hello'][(i // 5) % 2]} "
            + " ".join(rng.choice(words) for _ in range(120)) for i in range(count)]


def over_window(engine) -> list[dict]:
    return [r for r in engine.requests if r["status"] != 200]


@pytest.mark.slow
def test_sixty_responses_turns_chained_by_previous_response_id_fit_the_window(tmp_path):
    with ScriptedEngine.serve(SCRIPT, context_window=WINDOW) as engine, \
            serve_app(tmp_path, engine.base_url, hcp=HCP) as served:
        client = served.client()
        previous = None
        for text in turns(60):
            response = client.responses.create(model="mol", input=text,
                                               previous_response_id=previous)
            assert response.status == "completed" and response.output_text
            previous = response.id
    assert over_window(engine) == []
    compactions = [r for r in engine.requests
                   if "conversation is about to be shortened" in str(r["body"]["messages"][-2:])]
    assert compactions
    assert transcript_problems(engine.requests) == []


@pytest.mark.slow
def test_sixty_chat_turns_resending_history_fit_the_window_and_the_history_is_untouched(
        tmp_path):
    with ScriptedEngine.serve(SCRIPT, context_window=WINDOW) as engine, \
            serve_app(tmp_path, engine.base_url, hcp=HCP) as served:
        client = served.client()
        history: list[dict] = []
        for text in turns(60):
            history.append({"role": "user", "content": text})
            reply = client.chat.completions.create(model="mol", messages=history)
            message = reply.choices[0].message
            assert message.content
            history.append({"role": "assistant", "content": message.content})
    assert over_window(engine) == []
    assert len(history) == 120 and history[0]["content"] == turns(1)[0]
    assert transcript_problems(engine.requests) == []


def test_compact_then_continue_with_the_compaction_item(tmp_path):
    with ScriptedEngine.serve(SCRIPT, context_window=WINDOW) as engine, \
            serve_app(tmp_path, engine.base_url, hcp=HCP) as served:
        client = served.client()
        first = client.responses.create(model="mol", input=turns(1)[0])
        second = client.responses.create(model="mol", input=turns(2)[1],
                                         previous_response_id=first.id)
        compacted = client.responses.compact(model="mol", previous_response_id=second.id)
        assert compacted.object == "response.compaction"
        *users, item = compacted.output
        assert item.type == "compaction" and item.encrypted_content
        assert [u.content[0].text for u in users] == turns(2)
        assert compacted.usage.output_tokens > 0
        before = len(engine.requests)
        going_on = client.responses.create(model="mol", input=[
            {"type": "compaction", "id": item.id, "encrypted_content": item.encrypted_content},
            {"role": "user", "content": "please act once more"}])
        assert going_on.status == "completed" and going_on.output_text == "Acted."
        asked = [r["body"]["messages"] for r in engine.requests[before:]
                 if r["adapter"] == "L1"]
        # L1's view as the engine sees it: the system prompt, the summary, ..., the question.
        assert asked[0][1]["content"].startswith("[Context: a summary of the earlier part")
        assert asked[0][-1]["content"] == "please act once more"


def test_a_forged_or_altered_compaction_item_is_a_400_naming_it(tmp_path):
    with ScriptedEngine.serve(SCRIPT, context_window=WINDOW) as engine, \
            serve_app(tmp_path, engine.base_url, hcp=HCP) as served:
        client = served.client()
        first = client.responses.create(model="mol", input="hello")
        item = client.responses.compact(model="mol", previous_response_id=first.id).output[-1]
        altered = item.encrypted_content[:-4] + ("0000" if not item.encrypted_content.endswith(
            "0000") else "1111")
        for token in (altered, "molc1.Zm9yZ2Vk.deadbeef", "anything"):
            with pytest.raises(openai.BadRequestError) as refused:
                client.responses.create(model="mol", input=[
                    {"type": "compaction", "encrypted_content": token},
                    {"role": "user", "content": "go on"}])
            error = refused.value.body
            assert error["param"] == "input[0].encrypted_content"
            assert error["code"] == "invalid_compaction_item"
    assert all(r["status"] == 200 for r in engine.requests)


def test_context_management_compacts_mid_conversation_and_the_stream_says_so(tmp_path):
    with ScriptedEngine.serve(SCRIPT, context_window=WINDOW) as engine, \
            serve_app(tmp_path, engine.base_url, hcp=HCP) as served:
        client = served.client()
        first = client.responses.create(model="mol", input=turns(10)[5])  # a hello, on L0
        stream = client.responses.create(
            model="mol", input="hello once more", previous_response_id=first.id, stream=True,
            context_management=[{"type": "compaction", "compact_threshold": 100}])
        events = list(stream)
    kinds = [e.type for e in events]
    assert "response.compaction.compacting" in kinds
    compacting = next(e for e in events if e.type == "response.compaction.compacting")
    done = next(e for e in events if e.type == "response.output_item.done"
                and e.item.type == "compaction")
    assert done.item.id == compacting.item_id and done.item.encrypted_content
    final = events[-1].response
    assert final.status == "completed" and final.output[0].type == "compaction"
    assert kinds.index("response.compaction.compacting") < kinds.index(
        "response.output_text.delta")


def test_a_fork_from_before_a_compaction_keeps_the_view_it_had(tmp_path):
    with ScriptedEngine.serve(SCRIPT, context_window=WINDOW) as engine, \
            serve_app(tmp_path, engine.base_url, hcp=HCP) as served:
        client = served.client()
        texts = turns(10)[5:]  # five hellos, all on L0
        first = client.responses.create(model="mol", input=texts[0])
        second = client.responses.create(model="mol", input=texts[1],
                                         previous_response_id=first.id)
        compacted = client.responses.compact(model="mol", previous_response_id=second.id)
        item = compacted.output[-1]
        client.responses.create(model="mol", input=[
            {"type": "compaction", "encrypted_content": item.encrypted_content},
            {"role": "user", "content": "hello after"}])
        before = len(engine.requests)
        forked = client.responses.create(model="mol", input="hello from the fork",
                                         previous_response_id=second.id)
        assert forked.status == "completed"
    asked = [r["body"]["messages"] for r in engine.requests[before:]
             if r["adapter"] == "L0" and r["body"]["messages"][-1]["content"]
             == "hello from the fork"]
    # The fork's view: both earlier turns verbatim, no summary of them.
    assert [m["content"] for m in asked[0] if m["role"] == "user"][:2] == texts[:2]
    assert not any("a summary of the earlier part" in (m["content"] or "")
                   for m in asked[0])
