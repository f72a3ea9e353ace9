"""The tool-call contract of every view (``mol.runtime.views``): an assistant tool-call
message is followed by exactly its results before anything else; a tool message answers a
call still open. ``seed_view`` and ``commit`` refuse a view that would break it, and leave
the view as it was."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mol.core.errors import InvalidTranscript
from mol.runtime.views import Conversation, open_calls, steps_problem

USER = {"role": "user", "content": "hi"}


def asks(*ids: str) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}}
        for i in ids]}


def result(call_id: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": "ok"}


@pytest.mark.parametrize(("messages", "needle"), [
    ([USER, result("a")], "no open call"),
    ([USER, asks("a"), USER], "before the results of ['a']"),
    ([USER, asks("a", "b"), result("b"), USER], "before the results of ['a']"),
    ([USER, asks("a"), result("a"), result("a")], "no open call"),
    ([USER, asks("a", "a")], "the same call id twice"),
    ([USER, asks("a")], "end with calls ['a'] unanswered"),
])
def test_broken_transcripts_are_named(messages, needle):
    problem = steps_problem(messages)
    assert problem is not None and needle in problem


def test_results_in_any_order_and_an_open_end_when_allowed():
    assert steps_problem([USER, asks("a", "b"), result("b"), result("a"), USER]) is None
    assert steps_problem([USER, asks("a", "b"), result("b")], open_end=True) is None
    assert open_calls([USER, asks("a", "b"), result("b")]) == ["a"]
    assert open_calls([USER, asks("a"), result("a"), {"role": "assistant", "content": "x"}]) \
        == []


def test_seed_view_and_commit_refuse_an_invalid_view_and_change_nothing():
    conversation = Conversation()
    with pytest.raises(InvalidTranscript, match="the view of L1"):
        conversation.seed_view("L1", [USER, asks("a"), USER])
    assert "L1" not in conversation.views
    conversation.seed_view("L1", [USER, asks("a")])  # a turn waiting for its result
    with pytest.raises(InvalidTranscript):
        conversation.commit("L1", [USER])
    with pytest.raises(InvalidTranscript):
        conversation.commit("L1", [result("b")])
    assert conversation.views["L1"] == [USER, asks("a")]
    conversation.commit("L1", [result("a"), {"role": "assistant", "content": "done"}])
    assert len(conversation.views["L1"]) == 4


def reference_valid(messages: list[dict], open_end: bool) -> bool:
    """The contract, stated another way: cut the messages at each non-tool message; each
    piece is one message and the results of its calls, each exactly once."""
    pieces: list[list[dict]] = []
    for message in messages:
        if message["role"] == "tool":
            if not pieces:
                return False
            pieces[-1].append(message)
        else:
            pieces.append([message])
    for n, (head, *results) in enumerate(pieces):
        ids = [c["id"] for c in head.get("tool_calls") or []]
        answered = [r["tool_call_id"] for r in results]
        if len(set(ids)) != len(ids) or len(set(answered)) != len(answered):
            return False
        if not set(answered) <= set(ids):
            return False
        last = n == len(pieces) - 1
        if set(answered) != set(ids) and not (open_end and last):
            return False
    return True


MESSAGES = st.lists(st.one_of(
    st.just(USER),
    st.lists(st.sampled_from("abc"), min_size=1, max_size=3).map(lambda ids: asks(*ids)),
    st.sampled_from("abcd").map(result)), max_size=8)


@given(MESSAGES, st.booleans())
def test_the_check_agrees_with_the_contract(messages, open_end):
    assert (steps_problem(messages, open_end) is None) == reference_valid(messages, open_end)
