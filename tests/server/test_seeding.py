"""Conversations rebuilt from a history mol does not know (another server's, a client's
that rewrote it) give every adapter a valid view: tool results on such a history go to
the adapter that issued the calls, the other adapters' views stop before that turn, and a
call the client abandoned gets a placeholder result. Every engine request, in any view,
is a valid Chat Completions transcript."""

from __future__ import annotations

from mol.runtime.testing import ScriptedEngine

from .conftest import serve_app, settled_turns, transcript_problems

SCRIPT = """
[[L0]]
constrained = true
when = "code"
times = -1
reply = "L2"
[[L0]]
constrained = true
times = -1
reply = "L1"
[[L0]]
constrained = false
times = -1
reply = "summary"

[[L1]]
times = -1
reply = "It is sunny in Paris."
[[L2]]
times = -1
reply = "def f(): pass"
"""

FOREIGN = [  # a history from elsewhere: an abandoned call, then a call waiting for its result
    {"role": "user", "content": "look something up"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_L2_abandoned1", "type": "function",
         "function": {"name": "lookup", "arguments": "{}"}}]},
    {"role": "user", "content": "the weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_L1_foreign01", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
    {"role": "tool", "tool_call_id": "call_L1_foreign01", "content": "sunny"},
]


def test_a_rebuilt_conversation_stays_valid_in_every_view(tmp_path):
    with ScriptedEngine.serve(SCRIPT) as engine, serve_app(tmp_path, engine.base_url) as served:
        client = served.client()
        first = client.chat.completions.create(model="mol", messages=FOREIGN)
        assert first.choices[0].message.content == "It is sunny in Paris."
        history = [*FOREIGN, {"role": "assistant", "content": "It is sunny in Paris."},
                   {"role": "user", "content": "now write code"}]
        second = client.chat.completions.create(model="mol", messages=history)
        assert second.choices[0].message.content == "def f(): pass"
        requests = engine.requests
        rows = settled_turns(served.store, "%", 2)

    assert transcript_problems(requests) == []
    l1 = next(r["body"]["messages"] for r in requests if r["adapter"] == "L1")
    # The issuer's view ends with the open call and its result, without routing.
    assert l1[-1] == FOREIGN[-1] and l1[-2]["tool_calls"][0]["id"] == "call_L1_foreign01"
    abandoned = next(i for i, m in enumerate(l1) if m.get("tool_calls") and
                     m["tool_calls"][0]["id"] == "call_L2_abandoned1")
    assert l1[abandoned + 1]["tool_call_id"] == "call_L2_abandoned1"
    assert l1[abandoned + 1]["content"].startswith("[no result")
    # L2's view: the history before the weather turn, then the summary of that turn.
    l2 = next(r["body"]["messages"] for r in requests
              if r["adapter"] == "L2")
    assert "the weather in Paris?" not in [m["content"] for m in l2 if m["role"] == "user"]
    assert l2[-1] == {"role": "user", "content": "now write code"}
    assert any("summary" in (m.get("content") or "") for m in l2)
    # One conversation: the continued turn, then the next one.
    assert len({row[0] for row in rows}) == 1
    assert [(row[2], row[3]) for row in rows] == [("complete", "L1"), ("complete", "L2")]
