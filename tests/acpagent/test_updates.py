"""A turn's events as ACP updates, live and replayed; the stop reasons; what a person reads of
a call (titles, the complete arguments, output fenced as code)."""

from __future__ import annotations

import json

import pytest
from acp import schema

from mol.acpagent.text import call_text, fenced, title_text
from mol.acpagent.updates import Updates, stop_reason
from mol.core import events as ev
from mol.runtime import TurnRecord

pytestmark = pytest.mark.anyio


class Peer:
    """The editor's side, keeping every notification."""

    def __init__(self) -> None:
        self.sent: list[dict] = []

    async def notify(self, method: str, params: dict) -> None:
        assert method == "session/update"
        schema.SessionNotification.model_validate(params)  # the SDK reads it
        self.sent.append(params["update"])


def updates() -> tuple[Updates, Peer]:
    peer = Peer()
    return Updates(peer, "s1", lambda tool, path: f"/work/{path}"), peer


TURN = [
    ev.RouteDecided("L2", "L2"),
    ev.ReasoningDelta("L2", "let me "), ev.ReasoningDelta("L2", "look"),
    ev.ToolCalled("L2", "call_L2_1", "read_file", json.dumps({"path": "a.py"})),
    ev.ToolReturned("L2", "call_L2_1", "read_file", "print(1)", False),
    ev.ToolCalled("L2", "call_L2_2", "terminal", json.dumps({"command": "echo ```"})),
    ev.Approved("terminal", "call_L2_2", True),
    ev.ToolReturned("L2", "call_L2_2", "terminal", "```\n[exit code: 0]", False),
    ev.ReasoningDelta("L2", "it ran"),
    ev.TextDelta("L2", "Done"), ev.TextDelta("L2", "."),
    ev.Answered("L2", "Done.", reasoning="it ran"),
]


async def test_a_turn_s_events_as_updates():
    shown, peer = updates()
    shown.begin()
    for event in TURN:
        await shown(event)
    kinds = [u["sessionUpdate"] for u in peer.sent]
    assert kinds == ["agent_thought_chunk", "agent_thought_chunk", "tool_call", "tool_call_update",
                     "tool_call", "tool_call_update", "tool_call_update", "agent_thought_chunk",
                     "agent_message_chunk", "agent_message_chunk"]
    read = peer.sent[2]
    assert read == {"sessionUpdate": "tool_call", "toolCallId": "call_L2_1", "title": "Read a.py",
                    "kind": "read", "status": "pending", "rawInput": {"path": "a.py"},
                    "locations": [{"path": "/work/a.py"}],
                    "_meta": {"mol": {"adapter": "L2", "tool": "read_file"}}}
    assert peer.sent[3]["status"] == "completed"
    assert peer.sent[3]["content"] == [{"type": "content",
                                        "content": {"type": "text", "text": "print(1)"}}]
    assert peer.sent[4]["kind"] == "execute" and peer.sent[4]["title"] == "echo ```"
    assert peer.sent[5] == {"sessionUpdate": "tool_call_update", "toolCallId": "call_L2_2",
                            "status": "in_progress"}
    # Terminal output as a code block whose fence its own backticks cannot close.
    assert peer.sent[6]["content"][0]["content"]["text"] == "````\n```\n[exit code: 0]\n````"
    # The answer was streamed, and so was the thought: the answer event repeats neither.
    assert "".join(u["content"]["text"] for u in peer.sent if
                   u["sessionUpdate"] == "agent_message_chunk") == "Done."
    assert peer.sent[-1]["_meta"] == {"mol": {"adapter": "L2"}}


async def test_a_replay_shows_what_the_turn_logged_without_its_deltas():
    shown, peer = updates()
    logged = [e.to_dict() for e in TURN if not isinstance(e, ev.TextDelta)]
    record = TurnRecord(index=0, adapter="L2", user="fix a.py", answer="Done.")
    lost = TurnRecord(index=1, adapter="L0", user="and then?", answer="Nothing.")
    await shown.replay([record, lost], [{"index": 0, "events": logged}])
    assert peer.sent[0] == {"sessionUpdate": "user_message_chunk",
                            "content": {"type": "text", "text": "fix a.py"}}
    messages = [u["content"]["text"] for u in peer.sent
                if u["sessionUpdate"] == "agent_message_chunk"]
    assert messages == ["Done.", "Nothing."]  # the second turn's log is gone: its record
    thoughts = [u["content"]["text"] for u in peer.sent
                if u["sessionUpdate"] == "agent_thought_chunk"]
    assert thoughts == ["let me ", "look", "it ran"]  # logged as deltas: not again


async def test_an_answer_not_streamed_is_sent_whole_with_its_thought():
    shown, peer = updates()
    shown.begin()
    await shown(ev.Answered("L1", "Whole.", reasoning="thought"))
    assert [(u["sessionUpdate"], u["content"]["text"]) for u in peer.sent] == [
        ("agent_thought_chunk", "thought"), ("agent_message_chunk", "Whole.")]


@pytest.mark.parametrize(("name", "arguments", "entries"), [
    ("update_plan", {"plan": [{"step": "read", "status": "completed"},
                              {"step": "fix", "status": "in_progress"}]},
     [{"content": "read", "priority": "medium", "status": "completed"},
      {"content": "fix", "priority": "medium", "status": "in_progress"}]),
    ("mcp__todo__TodoWrite", {"todos": [{"content": "test", "status": "odd", "priority": "high"}]},
     [{"content": "test", "priority": "high", "status": "pending"}]),
])
async def test_a_plan_tool_s_call_is_the_plan(name, arguments, entries):
    shown, peer = updates()
    await shown(ev.ToolCalled("L1", "call_L1_1", name, json.dumps(arguments)))
    assert peer.sent[-1] == {"sessionUpdate": "plan", "entries": entries}


async def test_calls_left_open_end_failed_with_what_they_attached():
    shown, peer = updates()
    await shown(ev.ToolCalled("L1", "call_L1_1", "terminal", '{"command": "sleep 9"}'))
    await shown.attach("call_L1_1", {"type": "terminal", "terminalId": "t1"})
    await shown.end_open("cancelled")
    assert peer.sent[-1] == {"sessionUpdate": "tool_call_update", "toolCallId": "call_L1_1",
                             "status": "failed", "content": [
                                 {"type": "terminal", "terminalId": "t1"},
                                 {"type": "content", "content": {"type": "text",
                                                                 "text": "cancelled"}}]}
    await shown.end_open("again")
    assert len(peer.sent) == 3  # nothing was open any more


@pytest.mark.parametrize(("stopped", "finish", "reason"), [
    ("", "stop", "end_turn"), ("", "length", "max_tokens"), ("max_steps", "", "max_turn_requests"),
    ("token_budget", "", "max_tokens"), ("prompt_blocked", "", "refusal")])
def test_stop_reasons(stopped, finish, reason):
    assert stop_reason(stopped, finish) == reason
    assert reason in schema.StopReason.__args__


def test_a_title_cannot_hide_part_of_a_command():
    assert title_text("ls\x1b[2J\u202e; rm -rf x") == "ls\\x1b[2J\\u202e; rm -rf x"
    long = "ls" + " " * 500 + "; rm -rf ~"
    shown = title_text(long)
    assert shown.endswith("… (112 more characters)") and len(shown) < len(long)
    assert title_text("a\nb") == "a\\nb"


def test_a_call_to_approve_is_shown_whole_and_escaped():
    text = call_text("terminal", {"command": "echo \u202eevil" + " " * 300 + "; rm -rf ~"})
    assert "\\u202e" in text and "; rm -rf ~" in text and "\u202e" not in text
    assert text.startswith("terminal with\n```json\n{")
    assert fenced("a") == "```\na\n```"
