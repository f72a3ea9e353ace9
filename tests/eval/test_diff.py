"""Where two engine requests differ: the field, the message, a short diff."""

from __future__ import annotations

from mol.eval.trajectories.diff import request_difference, text_diff
from mol.eval.trajectories.format import normalized


def request(**fields):
    base = {"adapter": "L2", "messages": [
        {"role": "system", "content": "You code.\n\n# Tools\n- terminal: run"},
        {"role": "user", "content": "fix it"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_L2_00ab", "type": "function",
             "function": {"name": "terminal", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_L2_00ab", "content": "ok"}],
        "tools": [{"type": "function", "function": {"name": "terminal", "parameters": {}}}],
        "params": {"max_tokens": 10}, "choices": None}
    return {**base, **fields}


def test_mol_call_ids_do_not_count_as_a_difference() -> None:
    other = request()
    other["messages"][2] = {**other["messages"][2], "tool_calls": [
        {**other["messages"][2]["tool_calls"][0], "id": "call_L2_99ff"}]}
    other["messages"][3] = {**other["messages"][3], "tool_call_id": "call_L2_99ff"}
    assert request_difference(request(), other) is None
    assert normalized(other)["messages"][3]["tool_call_id"] == "call#1"


def test_the_first_difference_is_named_with_a_diff() -> None:
    changed = request()
    changed["messages"] = [
        {"role": "system", "content": "You code well.\n\n# Tools\n- terminal: run"},
        *changed["messages"][1:]]
    where, diff = request_difference(request(), changed)
    assert where == "messages[0] (system)"
    assert diff.splitlines()[:3] == ["@@ -1,2 +1,2 @@", "-You code.", "+You code well."]
    assert request_difference(request(), request(adapter="L1"))[0] == "adapter"
    tool = [*request()["messages"][:3],
            {"role": "tool", "tool_call_id": "call_L2_00ab", "content": "failed"}]
    assert request_difference(request(), request(messages=tool)) == (
        "messages[3] (tool)", "- ...ok\n+ ...failed")
    assert request_difference(request(), request(messages=request()["messages"][:2]))[0] == \
        "messages[2]"
    assert request_difference(request(), request(tools=[])) == ("tools", "-terminal")
    assert request_difference(request(), request(params={"max_tokens": 11}))[0] == "params"


def test_long_diffs_are_cut() -> None:
    old = "\n".join(f"line {i}" for i in range(40))
    new = "\n".join(f"line {i}!" for i in range(40))
    lines = text_diff(old, new).splitlines()
    assert len(lines) == 13 and lines[-1].startswith("... ") and lines[-1].endswith("more lines")
