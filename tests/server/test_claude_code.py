"""Claude Code (npm ``@anthropic-ai/claude-code``) against ``mol serve``'s Anthropic Messages
API, configured with nothing but ``ANTHROPIC_BASE_URL`` and ``ANTHROPIC_API_KEY``: it names
its own models (the default ``[server] model_aliases`` maps them), sends its tools, its
system prompt, mid-conversation system messages and thinking settings, streams, runs its
own ``Bash`` tool, and resumes a session (``--continue``) by resending its transcript.
Claude Code, the scripted engine and ``mol serve`` run in a network namespace with loopback
only (``agents_inside.py``), so nothing it tries (update checks, telemetry) reaches
outside."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mol.hcp.loader import load
from mol.server.api.models import ServedModels

from .conftest import npm_bin, run_inside, settled_turns, transcript_problems, write_hcp

pytestmark = [pytest.mark.slow, pytest.mark.npm("@anthropic-ai/claude-code")]

PACKAGE = "@anthropic-ai/claude-code@2.1.332"

SCRIPT = """
[[L0]]
constrained = true
when = "mol-task-shell"
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
when = "mol-42"
times = -1
reply = "The command printed mol-42."
[[L1]]
when = "mol-task-shell"
times = -1
tool_calls = [{ name = "Bash", arguments = { command = "echo mol-$((6*7))", description = "Print a number" } }]
[[L2]]
when = "mol-task-again"
times = -1
reply = "Still here, in the same conversation."
[[L2]]
times = -1
reply = "Hello from mol."
"""


@pytest.fixture(scope="module")
def claude_bin() -> Path:
    """Claude Code's launcher, installed from npm once per machine (its native binary)."""
    return npm_bin(PACKAGE, "claude")


def claude_runs(tmp_path: Path, claude: Path, *runs: list[str]) -> list[dict]:
    """One ``claude -p`` per argument list, in one folder and home, streaming JSON."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    env = {"HOME": str(home), "ANTHROPIC_BASE_URL": "http://127.0.0.1:{port}",
           "ANTHROPIC_API_KEY": "{key}"}
    return [{"argv": [str(claude), "-p", *args, "--output-format", "stream-json",
                      "--verbose"], "env": env, "cwd": str(work), "timeout": 240}
            for args in runs]


def events(run: dict, kind: str) -> list[dict]:
    return [e for e in run["events"] if e.get("type") == kind]


def blocks(run: dict, role: str, kind: str) -> list[dict]:
    """The content blocks of ``kind`` in the ``role`` messages Claude Code reported."""
    return [block for e in events(run, role) for block in e["message"]["content"]
            if isinstance(block, dict) and block.get("type") == kind]


def test_claude_code_answers_runs_its_bash_tool_and_resumes(tmp_path, claude_bin):
    outcome = run_inside(tmp_path, SCRIPT, claude_runs(
        tmp_path, claude_bin, ["mol-task-hello: say hi"],
        ["mol-task-shell: run the command", "--allowedTools", "Bash"],
        ["mol-task-again: are you still there?", "--continue"]))
    hello, shell, again = outcome["runs"]
    for run in outcome["runs"]:
        assert run["rc"] == 0, run["stderr"] + run["stdout"]
    assert events(hello, "result")[-1]["result"] == "Hello from mol."

    [use] = blocks(shell, "assistant", "tool_use")
    assert use["name"] == "Bash" and use["id"].startswith("call_L1_")
    [result] = blocks(shell, "user", "tool_result")
    assert result["tool_use_id"] == use["id"] and "mol-42" in str(result["content"])
    assert events(shell, "result")[-1]["result"] == "The command printed mol-42."

    requests = outcome["requests"]
    assert all(r["status"] == 200 for r in requests), [r.get("error") for r in requests]
    assert transcript_problems(requests) == []
    first, answered = [r["body"] for r in requests if r["adapter"] == "L1"
                       and r["body"].get("tools")]
    assert "Bash" in {t["function"]["name"] for t in first["tools"]}
    # Claude Code's result went back to the adapter that issued the call, after its call.
    assert answered["messages"][:len(first["messages"])] == first["messages"]
    assert answered["messages"][-2]["tool_calls"][0]["id"] == use["id"]
    assert "mol-42" in answered["messages"][-1]["content"]

    # --continue resent the transcript: the stored conversation went on in place (one
    # session, a second turn), and L2 learnt of L1's turn from its summary.
    assert events(again, "result")[-1]["result"] == "Still here, in the same conversation."
    store = tmp_path / "sessions.db"
    [shell_turn] = settled_turns(store, "%mol-task-shell%", 1)
    [again_turn] = settled_turns(store, "%mol-task-again%", 1)
    assert again_turn[0] == shell_turn[0] and (shell_turn[1], again_turn[1]) == (0, 1)
    resumed = next(r["body"]["messages"] for r in requests if r["adapter"] == "L2"
                   and "mol-task-again" in r["body"]["messages"][-1]["content"])
    assert any("[Context:" in m["content"] for m in resumed if m["role"] == "user")
    log = outcome["server_log"]
    assert "Traceback" not in log and outcome["server_rc"] == 0


def test_the_default_aliases_cover_the_models_claude_code_names(tmp_path, claude_bin):
    """The Anthropic model names the installed Claude Code carries (its default model and
    its small fast one among them) all run on the public model by default."""
    binary = (claude_bin.parent / claude_bin.readlink()).resolve() \
        if claude_bin.is_symlink() else claude_bin
    names = set(re.findall(rb"claude-(?:opus|sonnet|haiku)-[0-9][0-9a-z.-]*[0-9a-z]",
                           binary.read_bytes()))
    assert len(names) > 10
    served = ServedModels(load(write_hcp(tmp_path)))
    assert {served.resolve({"model": name.decode()}) for name in names} == {None}
