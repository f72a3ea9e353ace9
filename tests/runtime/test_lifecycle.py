"""The hook events of a turn: SessionStart, UserPromptSubmit, SubagentStart, Stop and
SubagentStop, each with Claude Code's stdin fields, through real turns."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from mol.runtime.testing import ScriptedEngine

from .conftest import bodies, session, write_hcp

pytestmark = pytest.mark.anyio

HOOK = """\
import json, pathlib, sys
event = json.load(sys.stdin)
with open(pathlib.Path(__file__).with_name("events.jsonl"), "a") as log:
    log.write(json.dumps(event) + "\\n")
name = event["hook_event_name"]
"""
BODIES = {
    "session.py": "print(json.dumps({'hookSpecificOutput': {'hookEventName': name, "
                  "'additionalContext': 'Project: mol.'}}))\n",
    "prompt.py": "if 'secret' in event['prompt']:\n"
                 "    print('no secrets here', file=sys.stderr)\n    sys.exit(2)\n"
                 "print('Today is test day.')\n",
    "start.py": "print('Context for ' + event['agent_type'] + '.')\n",
    "stop.py": "if event['last_assistant_message'] == 'first answer':\n"
               "    print(json.dumps({'decision': 'block', 'reason': 'Run the tests first.'}))\n",
    "handoff.py": "print('this turn stays with L2', file=sys.stderr)\nsys.exit(2)\n",
}


def hooks(tmp_path: Path) -> str:
    folder = tmp_path / "hooks"
    folder.mkdir()
    python = Path(sys.executable).as_posix()
    tables = []
    for (event, matcher), script in zip(
            [("SessionStart", "startup"), ("UserPromptSubmit", "*"), ("SubagentStart", "L2"),
             ("Stop", "*"), ("SubagentStop", "L2")], BODIES, strict=True):
        (folder / script).write_text(HOOK + BODIES[script])
        tables.append(f'[[hooks.{event}]]\nmatcher = "{matcher}"\n'
                      f'hooks = [{{ command = "{python} hooks/{script}", timeout = 30 }}]\n')
    return "\n" + "\n".join(tables)


SCRIPT = """
[[L0]]
constrained = true
when = "hello"
reply = "L2"
[[L2]]
when = "hello"
reply = "first answer"
[[L2]]
when = "Run the tests"
reply = "tested"
[[L0]]
constrained = true
reply = "L1"
[[L1]]
reply = "L1 here"
[[L0]]
constrained = false
times = -1
reply = "summary"
"""


def logged(tmp_path: Path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "hooks" / "events.jsonl").read_text()
            .splitlines()]


async def test_the_turn_events_fire_with_claude_codes_fields(tmp_path):
    artifact = write_hcp(tmp_path, extra=hooks(tmp_path))
    async with ScriptedEngine.serve(SCRIPT) as engine, session(artifact, engine) as h:
        first = await h.turn("hello there")
        refused = await h.turn("tell me a secret")
        other = await h.turn("and now?")
    # Stop blocked once: L2 went on with the reason, then ended with its second answer.
    assert (first.adapter, first.answer) == ("L2", "tested")
    opening, went_on = bodies(engine, "L2")
    context = opening["messages"][-2]["content"]
    assert context.startswith("[Context added by this assistant's hooks.]\n")
    assert context.endswith("Project: mol.\n\nToday is test day.\n\nContext for L2.")
    assert opening["messages"][-1] == {"role": "user", "content": "hello there"}
    assert went_on["messages"][-2:] == [
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "[Stop hook] Run the tests first."}]
    # UserPromptSubmit blocked the second turn before any model saw it.
    assert (refused.status, refused.stopped) == ("complete", "prompt_blocked")
    assert refused.answer == "[mol: the prompt was blocked by a hook: no secrets here]"
    assert not any("secret" in json.dumps(r["body"]) for r in engine.requests)
    # SubagentStop kept L2's summary from L1; L1 still got the session's context once.
    l1 = bodies(engine, "L1")[0]["messages"]
    assert not any("summary" in str(m["content"]) for m in l1)
    assert l1[1]["content"].endswith("Project: mol.\n\nToday is test day.")
    assert other.answer == "L1 here"
    events = logged(tmp_path)
    assert [e["hook_event_name"] for e in events] == [
        "SessionStart", "UserPromptSubmit", "SubagentStart", "Stop", "Stop", "SubagentStop",
        "UserPromptSubmit", "UserPromptSubmit", "Stop"]
    session_start, prompt, start, stop, stop_again, handoff = events[:6]
    assert {e["session_id"] for e in events} == {h.conversation.id}
    assert session_start["source"] == "startup" and prompt["prompt"] == "hello there"
    assert (start["agent_type"], start["agent_id"]) == ("L2", f"{h.conversation.id}:0")
    assert (stop["stop_hook_active"], stop["last_assistant_message"]) == (False, "first answer")
    assert (stop_again["stop_hook_active"], stop_again["last_assistant_message"]) == (True, "tested")
    assert (handoff["agent_type"], handoff["summary"]) == ("L2", "[L2] summary")
    decisions = [(e.event, e.decision) for e in first.events if e.type == "hook"]
    assert decisions == [("SessionStart", "context"), ("UserPromptSubmit", "context"),
                         ("SubagentStart", "context"), ("Stop", "block"),
                         ("SubagentStop", "block")]


async def test_a_resumed_conversation_starts_with_source_resume(tmp_path):
    python = Path(sys.executable).as_posix()
    resumed = ('\n[[hooks.SessionStart]]\nmatcher = "resume"\nhooks = [{ command = '
               f'"{python} hooks/resumed.py", timeout = 30 }}]\n')
    tables = hooks(tmp_path)
    (tmp_path / "hooks" / "resumed.py").write_text(
        HOOK + "print(json.dumps({'hookSpecificOutput': {'hookEventName': name, "
        "'additionalContext': 'Welcome back.'}}))\n")
    artifact = write_hcp(tmp_path, extra=tables + resumed)
    async with ScriptedEngine.serve(SCRIPT) as engine:
        async with session(artifact, engine) as h:
            await h.turn("hello there")
        conversation = h.conversation
        async with session(artifact, engine, conversation=conversation) as again:
            await again.turn("and now?")
    starts = [e for e in logged(tmp_path) if e["hook_event_name"] == "SessionStart"]
    # Each matcher ran once, on its own source: "startup" first, then "resume" (one hook
    # each), with the same conversation's id.
    assert [e["source"] for e in starts] == ["startup", "resume"]
    assert {e["session_id"] for e in starts} == {conversation.id}
    # The resumed session's context reached the adapter that answered after it (L1).
    assert "Welcome back." in json.dumps(bodies(engine, "L1")[0]["messages"])


async def test_a_failing_stop_hook_does_not_keep_the_adapter_going(tmp_path):
    folder = tmp_path / "hooks"
    folder.mkdir()
    (folder / "crash.py").write_text("raise SystemExit(3)\n")
    command = f"{Path(sys.executable).as_posix()} hooks/crash.py"
    artifact = write_hcp(tmp_path, extra=(
        f'\n[[hooks.Stop]]\nhooks = [{{ command = "{command}", on_error = "block" }}]\n'
        f'[[hooks.SessionStart]]\nhooks = [{{ command = "{command}", on_error = "block" }}]\n'))
    async with ScriptedEngine.serve(SCRIPT) as engine, session(artifact, engine) as h:
        result = await h.turn("hello there")
    assert result.answer == "first answer" and len(bodies(engine, "L2")) == 1
    decisions = [(e.event, e.decision) for e in result.events if e.type == "hook"]
    assert decisions == [("SessionStart", "ignored"), ("Stop", "ignored")]
