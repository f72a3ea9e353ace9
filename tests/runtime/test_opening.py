"""A Claude Code plugin bundle through real turns over the scripted engine: the slash command
expands and narrows the turn's tools, the bundle's PreToolUse hooks block one call and see
another, and the bundle's MCP server (from its .mcp.json, over stdio) lists its tool and
answers it. The command's ``allowed-tools`` and the hook's matcher name that tool as Claude
Code does (``mcp__plugin_<plugin>_<server>__<tool>``), unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mol.hcp.loader import load
from mol.runtime.mcp import MCPManager
from mol.runtime.testing import ScriptedEngine

from .conftest import bodies, hcp_text, session

pytestmark = pytest.mark.anyio

BUNDLE = Path(__file__).resolve().parents[1] / "hcp" / "fixtures" / "demo-plugin"
NOTES = "mcp__plugin_demo_notes__add_note"
"""Claude Code's name for the bundle's tool, which its command and hook use."""


def bundle_artifact(tmp_path: Path, extra: str = ""):
    path = tmp_path / "mol.toml"
    path.write_text(hcp_text(f"""\
[engine]
api_base = "http://127.0.0.1:9/v1"
max_retries = 0
[bundles]
paths = [{json.dumps(str(BUNDLE))}]
[adapters.L1]
tools.allow = ["echo"]
[adapters.L2]
prompt = "You review."
tools.allow = ["echo", "add"]
bundles = ["demo"]
[mcp_servers.other]
command = "python3"
args = ["-c", "pass"]
enabled = false
{extra}"""))
    return load(path)


SCRIPT = f"""
[[L2]]
when = "Review a.py"
tool_calls = [{{ name = "echo", arguments = {{ text = "forbidden words" }} }}]
[[L2]]
when = "demo guard refuses"
tool_calls = [{{ name = "{NOTES}", arguments = {{ text = "reviewed a.py" }} }}]
[[L2]]
when = "note"
reply = "Reviewed."
[[L0]]
constrained = true
reply = "L2"
[[L2]]
reply = "Plain turn."
[[L0]]
constrained = false
times = -1
reply = "summary"
"""


async def test_bundle_command_hook_and_mcp_server_in_real_turns(tmp_path, monkeypatch):
    monkeypatch.setenv("DEMO_NOTES_TOKEN", "t0ken")
    artifact = bundle_artifact(tmp_path)
    async with ScriptedEngine.serve(SCRIPT) as engine, MCPManager(artifact) as mcp:
        assert [t.name for t in await mcp.all_tools()] == [NOTES]
        async with session(artifact, engine, toolsets=[mcp]) as h:
            result = await h.turn("/review a.py speed")
            plain = await h.turn("anything else?")
    assert (result.adapter, result.answer) == ("L2", "Reviewed.")
    # Only L2 uses the command's bundle: the turn went to it without a routing request.
    assert [e.reason for e in result.events if e.type == "route"] == [
        "the only adapter using the command"]
    first, second, third, fourth = bodies(engine, "L2")
    assert first["messages"][-1] == {"role": "user", "content": (
        f"Review a.py with a focus on speed. Plugin files are in {BUNDLE}.\n"
        "All arguments: a.py speed\n")}
    # allowed-tools narrowed this turn's tools; the system prompt keeps the adapter's own.
    assert [t["function"]["name"] for t in first["tools"]] == ["echo", NOTES]
    assert "- add: Add two integers." in first["messages"][0]["content"]
    blocked, noted = second["messages"][-1]["content"], third["messages"][-1]["content"]
    assert blocked.startswith("Error: the call was blocked: demo guard refuses 'forbidden words'")
    assert "(plugin root demo-plugin)" in blocked
    assert noted == "demo: 1 note(s), with token"
    # The guard blocked echo; the hook matching Claude Code's name of the bundle's tool fired
    # for the call of that tool.
    assert [(e.event, e.tool, e.decision, e.reason) for e in result.events
            if e.type == "hook"] == [
        ("PreToolUse", "echo", "block", blocked.removeprefix("Error: the call was blocked: ")),
        ("PreToolUse", NOTES, "allow", f"the demo hook saw {NOTES} 'reviewed a.py'")]
    # The next turn is routed as usual and sees all of L2's tools again.
    assert plain.answer == "Plain turn."
    assert [t["function"]["name"] for t in fourth["tools"]] == ["add", "echo", NOTES]


async def test_an_unknown_slash_command_is_an_ordinary_turn(tmp_path):
    artifact = bundle_artifact(tmp_path)
    script = ('[[L0]]\nconstrained = true\nreply = "L1"\n[[L1]]\nreply = "ok"\n'
              '[[L0]]\nconstrained = false\ntimes = -1\nreply = "s"\n')
    async with ScriptedEngine.serve(script) as engine, session(artifact, engine) as h:
        result = await h.turn("/nosuch thing")
    assert result.answer == "ok"
    assert bodies(engine, "L1")[0]["messages"][-1]["content"] == "/nosuch thing"


async def test_the_bundle_hook_runs_only_for_the_adapters_using_the_bundle(tmp_path):
    artifact = bundle_artifact(tmp_path)
    script = """
[[L0]]
constrained = true
reply = "L1"
[[L1]]
tool_calls = [{ name = "echo", arguments = { text = "forbidden" } }]
[[L1]]
reply = "done"
[[L0]]
constrained = false
times = -1
reply = "s"
"""
    async with ScriptedEngine.serve(script) as engine, session(artifact, engine) as h:
        result = await h.turn("echo it")
    assert [e.content for e in result.events if e.type == "tool_result"] == ["FORBIDDEN"]
