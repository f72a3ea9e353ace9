"""Tool policy and hooks: hidden tools, command hooks (block, rewrite, timeout), plugin hooks."""

import json
import sys
from pathlib import Path

import pytest

from mol.plugins import hookimpl
from mol.runtime.hooks import Block, Rewrite
from mol.runtime.testing import ScriptedEngine

from .conftest import bodies, session, toy_plugins, write_hcp

pytestmark = pytest.mark.anyio

SUMMARY = '[[L0]]\nconstrained = false\ntimes = -1\nreply = "summary"\n'


def script_calling(name: str, arguments: str, adapter: str = "L2") -> str:
    return f"""
[[L0]]
constrained = true
reply = "{adapter}"
[[{adapter}]]
tool_calls = [{{ name = "{name}", arguments = {arguments} }}]
[[{adapter}]]
reply = "done"
""" + SUMMARY


async def run_one(artifact, script, **kwargs):
    async with ScriptedEngine.serve(script) as engine, session(artifact, engine, **kwargs) as h:
        result = await h.turn("do it")
    tool_results = [e for e in result.events if e.type == "tool_result"]
    return result, tool_results, engine


async def test_denied_tool_is_neither_listed_nor_runnable(hcp):
    _result, [returned], engine = await run_one(hcp, script_calling("secret", "{}"))
    listed = [t["function"]["name"] for t in bodies(engine, "L2")[0]["tools"]]
    assert listed == ["add", "echo", "fail", "risky"]
    assert "secret" not in bodies(engine, "L2")[0]["messages"][0]["content"]
    assert returned.is_error and "not available to you" in returned.content
    assert "the secret" not in json.dumps(bodies(engine, "L2")[1])


async def test_ask_is_refused_without_an_approver_and_runs_with_one(hcp):
    _, [refused], _ = await run_one(hcp, script_calling("risky", "{}"))
    assert refused.is_error and "nobody can approve" in refused.content

    async def yes(call):
        return call.name == "risky"

    _, [approved], _ = await run_one(hcp, script_calling("risky", "{}"), approve=yes)
    assert approved.content == "risky ran"


def hook_file(tmp_path: Path, name: str, body: str) -> str:
    folder = tmp_path / "hooks"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text("import json, sys, time\nevent = json.load(sys.stdin)\n" + body)
    return f"{Path(sys.executable).as_posix()} hooks/{name}"


def with_hook(tmp_path, command, event="PreToolUse", matcher="echo", extra=""):
    hook = (f'\n[[hooks.{event}]]\nmatcher = "{matcher}"\n'
            f'hooks = [{{ command = "{command}", timeout = 1{extra} }}]\n')
    return write_hcp(tmp_path, extra=hook)


async def test_command_hook_blocks_with_exit_2(tmp_path):
    command = hook_file(tmp_path, "block.py", 'print("no echo today", file=sys.stderr)\n'
                        "sys.exit(2 if event['tool_input']['text'] == 'x' else 0)\n")
    artifact = with_hook(tmp_path, command)
    result, [returned], _ = await run_one(artifact, script_calling("echo", '{ text = "x" }'))
    assert returned.is_error and "blocked: no echo today" in returned.content
    assert any(e.type == "hook" and e.decision == "block" for e in result.events)


async def test_command_hook_rewrites_input(tmp_path):
    command = hook_file(tmp_path, "rewrite.py", "print(json.dumps({'hookSpecificOutput': {"
                        "'hookEventName': 'PreToolUse', 'updatedInput': {'text': 'safe'}}}))\n")
    artifact = with_hook(tmp_path, command)
    _, [returned], _ = await run_one(artifact, script_calling("echo", '{ text = "rm -rf" }'))
    assert returned.content == "SAFE"


async def test_command_hook_json_deny(tmp_path):
    command = hook_file(tmp_path, "deny.py", "print(json.dumps({'hookSpecificOutput': {"
                        "'permissionDecision': 'deny', 'permissionDecisionReason': 'nope'}}))\n")
    _, [returned], _ = await run_one(with_hook(tmp_path, command),
                                     script_calling("echo", '{ text = "a" }'))
    assert returned.is_error and "nope" in returned.content


async def test_command_hook_can_approve_an_ask_tool(tmp_path):
    command = hook_file(tmp_path, "approve.py", "print(json.dumps({'hookSpecificOutput': {"
                        "'permissionDecision': 'allow'}}))\n")
    artifact = with_hook(tmp_path, command, matcher="risky")
    _, [returned], _ = await run_one(artifact, script_calling("risky", "{}"))
    assert returned.content == "risky ran"


@pytest.mark.parametrize("on_error, expected", [("block", "timed out"), ("allow", "HI")])
async def test_command_hook_timeout_follows_on_error(tmp_path, on_error, expected):
    command = hook_file(tmp_path, "slow.py", "time.sleep(30)\n")
    artifact = with_hook(tmp_path, command, extra=f', on_error = "{on_error}"')
    import time

    started = time.monotonic()
    _, [returned], _ = await run_one(artifact, script_calling("echo", '{ text = "hi" }'))
    assert time.monotonic() - started < 10
    assert expected in returned.content


async def test_crashing_hook_blocks_by_default(tmp_path):
    command = hook_file(tmp_path, "crash.py", "raise SystemExit(3)\n")
    _, [returned], _ = await run_one(with_hook(tmp_path, command),
                                     script_calling("echo", '{ text = "a" }'))
    assert returned.is_error and "exited with status 3" in returned.content


async def test_post_tool_hook_can_withhold_a_result(tmp_path):
    command = hook_file(tmp_path, "post.py", "assert event['tool_response']['content'] == 'A'\n"
                        "print(json.dumps({'decision': 'block', 'reason': 'leaks data'}))\n")
    artifact = with_hook(tmp_path, command, event="PostToolUse")
    _, [returned], engine = await run_one(artifact, script_calling("echo", '{ text = "a" }'))
    assert returned.is_error and "leaks data" in returned.content
    assert bodies(engine, "L2")[1]["messages"][-1]["content"] == returned.content


class Guard:
    """A plugin that blocks `add` with a negative number and rewrites echo's text."""

    @hookimpl
    def mol_before_tool_call(self, call, context):
        if call.name == "add" and call.arguments["a"] < 0:
            return Block("negative numbers are not allowed")
        if call.name == "echo":
            return Rewrite({"text": call.arguments["text"] + " (checked)"})
        return None

    @hookimpl
    async def mol_after_tool_call(self, call, result, context):
        assert context.adapter == "L2"
        return None


async def test_plugin_hook_blocks_and_rewrites(hcp):
    plugins = toy_plugins(("guard", Guard()))
    _, [blocked], _ = await run_one(hcp, script_calling("add", "{ a = -1 }"), plugins=plugins)
    assert blocked.is_error and "negative numbers are not allowed" in blocked.content
    plugins = toy_plugins(("guard", Guard()))
    _, [rewritten], _ = await run_one(hcp, script_calling("echo", '{ text = "hi" }'),
                                      plugins=plugins)
    assert rewritten.content == "HI (CHECKED)"


class Broken:
    """A plugin whose hooks raise: before a call, after it, or when its awaitable is awaited."""

    def __init__(self, where: str) -> None:
        self.where = where

    @hookimpl
    def mol_before_tool_call(self, call, context):
        if self.where == "before":
            raise RuntimeError("the guard's rule file is missing")
        if self.where == "awaited":
            return self._later()
        return None

    async def _later(self):
        raise ValueError("the guard's database is down")

    @hookimpl
    def mol_after_tool_call(self, call, result, context):
        if self.where == "after":
            raise KeyError("redactor")
        return None


@pytest.mark.parametrize("where", ["before", "awaited"])
async def test_a_raising_before_hook_blocks_the_call_and_the_turn_goes_on(hcp, where, caplog):
    plugins = toy_plugins(("broken-guard", Broken(where)))
    result, [blocked], engine = await run_one(hcp, script_calling("echo", '{ text = "hi" }'),
                                              plugins=plugins)
    assert blocked.is_error and "blocked" in blocked.content
    assert "plugin 'broken-guard' failed" in blocked.content
    assert result.answer == "done"  # the model read the error and answered
    assert bodies(engine, "L2")[1]["messages"][-1]["content"] == blocked.content
    assert any("broken-guard" in r.getMessage() for r in caplog.records)


async def test_a_raising_after_hook_withholds_the_result(hcp, caplog):
    plugins = toy_plugins(("broken-redactor", Broken("after")))
    result, [withheld], _ = await run_one(hcp, script_calling("echo", '{ text = "hi" }'),
                                          plugins=plugins)
    assert withheld.is_error and "plugin 'broken-redactor' failed" in withheld.content
    assert "HI" not in withheld.content and result.answer == "done"
    assert any("broken-redactor" in r.getMessage() for r in caplog.records)


async def test_an_answer_for_always_is_remembered_by_the_conversation_and_stored(hcp, tmp_path):
    from mol.core.tools import Approval
    from mol.runtime.sessions import TurnLog, open_store

    asked = []

    async def always(call):
        asked.append(call.name)
        return Approval(True, always=True)

    script = script_calling("risky", "{}") + script_calling("risky", "{}")
    async with ScriptedEngine.serve(script) as engine, session(hcp, engine,
                                                                approve=always) as s:
        first, second = await s.turn("do it"), await s.turn("again")
    assert asked == ["risky"]  # the second call was not asked about
    results = [e for r in (first, second) for e in r.events if e.type == "tool_result"]
    assert [r.content for r in results] == ["risky ran", "risky ran"]
    approvals = [e for r in (first, second) for e in r.events if e.type == "approval"]
    assert [(a.allow, a.always, a.remembered) for a in approvals] == [
        (True, True, False), (True, True, True)]
    async with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        await store.save(s.conversation, None, TurnLog())
        assert (await store.load(s.conversation.id)).approvals == {"risky": True}


async def test_never_refuses_with_the_reason_and_without_asking_again(hcp):
    from mol.core.tools import Approval

    asked = []

    async def never(call):
        asked.append(call.name)
        return Approval(False, always=True, reason="not on a Friday")

    script = script_calling("risky", "{}") + script_calling("risky", "{}")
    async with ScriptedEngine.serve(script) as engine, session(hcp, engine, approve=never) as s:
        first, second = await s.turn("do it"), await s.turn("again")
    refused = [e for r in (first, second) for e in r.events if e.type == "tool_result"]
    assert asked == ["risky"]
    assert "did not approve it: not on a Friday" in refused[0].content
    assert all(r.is_error for r in refused)


async def test_an_approver_answering_later_leaves_the_call_open_until_the_answer(hcp):
    """``LATER``: the turn ends waiting with the call open and remembered as asked; the
    answer resumes it on the adapter that issued the call (the tool runs, or the adapter
    reads the refusal with its reason); the approval is told either way."""
    from mol.core.tools import LATER, Approval

    async def later(call):
        return LATER

    stored: list[str] = []  # the turn's status at each checkpoint
    announced: list[str] = []  # the last stored status when the wait was told

    async def checkpoint(conversation, record, turn, durable=True):
        stored.append(record.status if record is not None else "")

    def observe(event):
        if event.type == "client_tool_calls":
            announced.append(stored[-1])

    for answer, read in [(Approval(True), "risky ran"),
                         (Approval(False, reason="not today"),
                          "Error: risky was not run: the user did not approve it: not today.")]:
        async with ScriptedEngine.serve(script_calling("risky", "{}")) as engine, \
                session(hcp, engine, approve=later, checkpoint=checkpoint,
                        observers=[observe]) as s:
            waiting = await s.turn("do it")
            assert announced[-1] == "waiting"  # stored so before anyone is told of it
            assert (waiting.status, waiting.client_calls) == ("waiting", [])
            [asked] = waiting.asked
            assert (asked["name"], asked["arguments"], asked["source"]) == (
                "risky", {}, "plugin:toy")
            assert asked["id"].startswith("call_L2_")
            assert not [e for e in waiting.events if e.type in ("tool_result", "approval")]
            assert s.conversation.asked[asked["id"]]["name"] == "risky"
            assert s.conversation.view("L2")[-1]["tool_calls"][0]["id"] == asked["id"]
            done = await s.submit_tool_results({}, approvals={asked["id"]: answer})
            assert (done.status, done.answer) == ("complete", "done")
            [result] = [e for e in done.events if e.type == "tool_result"]
            assert result.content == read and result.is_error is not answer.allow
            [told] = [e for e in done.events if e.type == "approval"]
            assert (told.call_id, told.allow, told.reason) == (asked["id"], answer.allow,
                                                               answer.reason)
            assert s.conversation.asked[asked["id"]] == {
                "name": "risky", "ended": "was allowed" if answer.allow else
                "was denied: not today"}
            assert bodies(engine, "L2")[-1]["messages"][-1]["content"] == read


async def test_answers_for_some_calls_only_leave_the_turn_waiting_for_the_rest(hcp):
    """A reply calling an ``ask`` tool and a client tool: the person's answer alone runs
    the tool (its result stored at once) and the turn goes on waiting for the client's."""
    from mol.core.errors import ConversationError
    from mol.core.tools import LATER, Approval

    async def later(call):
        return LATER

    client_tool = {"type": "function", "function": {"name": "lookup",
                                                    "parameters": {"type": "object"}}}
    script = """
[[L0]]
constrained = true
reply = "L2"
[[L2]]
tool_calls = [{ name = "risky", arguments = {} }, { name = "lookup", arguments = {} }]
[[L2]]
reply = "done"
""" + SUMMARY
    async with ScriptedEngine.serve(script) as engine, \
            session(hcp, engine, approve=later) as s:
        first = await s.turn("do it", client_tools=[client_tool])
        [asked], [call] = first.asked, first.client_calls
        second = await s.submit_tool_results({}, approvals={asked["id"]: Approval(True)})
        assert (second.status, second.asked) == ("waiting", [])
        assert [c["id"] for c in second.client_calls] == [call["id"]]
        assert s.conversation.view("L2")[-1] == {"role": "tool", "tool_call_id": asked["id"],
                                                 "content": "risky ran"}
        with pytest.raises(ConversationError, match="no call waits for a person's answer"):
            await s.submit_tool_results({}, approvals={asked["id"]: Approval(True)})
        third = await s.submit_tool_results({call["id"]: "found"})
        assert (third.status, third.answer) == ("complete", "done")
    [last] = bodies(engine, "L2")[-1:]
    assert [m.get("content") for m in last["messages"][-2:]] == ["risky ran", "found"]
