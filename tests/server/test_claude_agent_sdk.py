"""The Claude Agent SDK (``claude-agent-sdk``, which drives the Claude Code CLI) completes a
query against ``mol serve`` with a tool of its own: Claude Code defers MCP tools behind its
tool search, so the adapter (as a Claude model would) finds the tool with ``ToolSearch``
first, then calls it; the SDK runs it in its process, and the answer reads its result.
The SDK program, Claude Code, the scripted engine and ``mol serve`` run in a
loopback-only network namespace (Claude Code asks for a title on the side, too)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from .conftest import npm_bin, run_inside, transcript_problems
from .test_claude_code import PACKAGE

pytestmark = [pytest.mark.slow, pytest.mark.npm("@anthropic-ai/claude-code")]

CLIENT = Path(__file__).with_name("claude_sdk_client.py")

SCRIPT = """
[[L0]]
constrained = true
when = "Write the title"
times = -1
reply = "L2"
[[L0]]
constrained = true
when = "mol-task-lookup"
times = -1
reply = "L1"
[[L0]]
constrained = true
times = -1
reply = "L2"
[[L0]]
constrained = false
times = -1
reply = "summary"
[[L1]]
when = "forty-two"
times = -1
reply = "The notes say the answer is forty-two."
[[L1]]
when = "tool found: mcp__notes__lookup"
times = -1
tool_calls = [{ name = "mcp__notes__lookup", arguments = { key = "the answer" } }]
[[L1]]
when = "mol-task-lookup"
times = -1
tool_calls = [{ name = "ToolSearch", arguments = { query = "select:mcp__notes__lookup" } }]
[[L2]]
times = -1
reply = "Looking up the answer"
"""


def test_the_agent_sdk_completes_a_query_with_its_own_tool(tmp_path):
    claude = npm_bin(PACKAGE, "claude")
    (tmp_path / "home").mkdir()
    (tmp_path / "work").mkdir()
    run = {"argv": [sys.executable, str(CLIENT), "mol-task-lookup: what is the answer?",
                    str(claude)],
           "env": {"HOME": str(tmp_path / "home"), "ANTHROPIC_BASE_URL": "http://127.0.0.1:{port}",
                   "ANTHROPIC_API_KEY": "{key}"},
           "cwd": str(tmp_path / "work"), "timeout": 240}
    outcome = run_inside(tmp_path, SCRIPT, [run])
    [done] = outcome["runs"]
    assert done["rc"] == 0, done["stderr"] + done["stdout"]
    lines = done["events"]
    uses = [b for line in lines if line.get("type") == "AssistantMessage"
            for b in line["content"] if b["type"] == "tool_use"]
    assert [(u["name"], u["input"]) for u in uses] == [
        ("ToolSearch", {"query": "select:mcp__notes__lookup"}),
        ("mcp__notes__lookup", {"key": "the answer"})]
    assert all(u["id"].startswith("call_L1_") for u in uses)
    assert lines[-1] == {"type": "looked_up", "keys": ["the answer"]}
    result = next(line for line in lines if line.get("type") == "ResultMessage")
    assert result == {"type": "ResultMessage", "is_error": False,
                      "result": "The notes say the answer is forty-two."}
    requests = outcome["requests"]
    assert all(r["status"] == 200 for r in requests), [r.get("error") for r in requests]
    assert transcript_problems(requests) == []
    searched, found, answered = [r["body"] for r in requests if r["adapter"] == "L1"
                                 and r["body"].get("tools")]
    # The tool is offered once the search found it (the search result names it).
    assert "mcp__notes__lookup" not in {t["function"]["name"] for t in searched["tools"]}
    assert "mcp__notes__lookup" in {t["function"]["name"] for t in found["tools"]}
    assert found["messages"][-1]["content"].startswith("[tool found: mcp__notes__lookup]")
    assert answered["messages"][-2]["tool_calls"][0]["id"] == uses[1]["id"]
    assert answered["messages"][-1]["role"] == "tool"
    assert "forty-two" in answered["messages"][-1]["content"]
