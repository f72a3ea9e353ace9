"""Codex CLI (npm ``@openai/codex``, ``wire_api = "responses"``) against ``mol serve``, with
its default features: every tool it sends (function tools, the ``multi_agent_v1``
namespace, the hosted ``web_search``), ``store: false``, the whole input replayed on each
request; and with ``supports_websockets = true``, over the Responses WebSocket. Codex, the
scripted engine and ``mol serve`` run in a network namespace with loopback only
(``agents_inside.py``), so nothing Codex tries (update checks, telemetry) reaches outside."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import npm_bin, run_inside, transcript_problems

pytestmark = [pytest.mark.slow, pytest.mark.npm("@openai/codex")]

PACKAGE = "@openai/codex@0.169.0"

SCRIPT = """
[[L0]]
constrained = true
when = "shell"
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
when = "shell"
times = -1
tool_calls = [{ name = "exec_command", arguments = { cmd = "echo mol-$((6*7))" } }]
[[L2]]
times = -1
reply = "Hello from mol."
"""


@pytest.fixture(scope="module")
def codex_bin() -> Path:
    """Codex's launcher, installed from npm once per machine (with its native binary)."""
    return npm_bin(PACKAGE, "codex")


def codex_runs(tmp_path: Path, codex: Path, prompts: list[str],
               provider: str = "") -> list[dict]:
    """One ``codex exec`` per prompt, with Codex's default features, its provider at the
    server (``provider``: more of its fields)."""
    home, work = tmp_path / "home", tmp_path / "work"
    (home / ".codex").mkdir(parents=True)
    work.mkdir()
    entry = (f'{{name = "mol", base_url = "http://127.0.0.1:{{port}}/v1", '
             f'env_key = "MOL_TEST_KEY", wire_api = "responses"{provider}}}')
    command = [str(codex), "exec", "--json", "--skip-git-repo-check", "-C", str(work),
               "-c", "model_provider=mol", "-c", "model=mol",
               "-c", f"model_providers.mol={entry}",
               "-c", "check_for_update_on_startup=false", "-c", "analytics.enabled=false",
               "-c", "feedback.enabled=false"]
    env = {"HOME": str(home), "CODEX_HOME": str(home / ".codex"), "MOL_TEST_KEY": "{key}",
           "TERM": "dumb", "NO_COLOR": "1"}
    return [{"argv": [*command, prompt], "env": env} for prompt in prompts]


def items(run: dict, kind: str) -> list[dict]:
    return [e["item"] for e in run["events"]
            if e.get("type") == "item.completed" and e["item"].get("type") == kind]


def test_codex_exec_answers_and_runs_its_own_shell_tool(tmp_path, codex_bin):
    outcome = run_inside(tmp_path, SCRIPT, codex_runs(tmp_path, codex_bin, [
        "say hi", "run the shell command and tell me what it printed"]))
    text, shell = outcome["runs"]
    assert text["rc"] == 0, text["stderr"]
    assert [m["text"] for m in items(text, "agent_message")] == ["Hello from mol."]
    assert shell["rc"] == 0, shell["stderr"]
    [command] = items(shell, "command_execution")
    assert "echo mol-$((6*7))" in command["command"] and command["exit_code"] == 0
    assert command["aggregated_output"].strip() == "mol-42"
    assert [m["text"] for m in items(shell, "agent_message")] == ["The command printed mol-42."]

    requests = outcome["requests"]
    assert all(r["status"] == 200 for r in requests), [r.get("error") for r in requests]
    assert transcript_problems(requests) == []
    first, answered = [r["body"] for r in requests if r["adapter"] == "L1"]
    names = {t["function"]["name"] for t in first["tools"]}
    # Codex's function tools and its namespaced ones, flattened; no hosted web_search.
    assert {"exec_command", "spawn_agent", "wait_agent"} <= names
    assert all(t["type"] == "function" for t in first["tools"])
    # The second request replays the whole input: the call goes back to the adapter that
    # issued it (in the call id), with Codex's own output as the result.
    call = answered["messages"][-2]["tool_calls"][0]
    assert call["id"].startswith("call_L1_") and call["function"]["name"] == "exec_command"
    assert answered["messages"][-1]["role"] == "tool"
    assert "mol-42" in answered["messages"][-1]["content"]
    log = outcome["server_log"]
    assert "left out hosted tools mol cannot run: web_search" in log
    assert "Traceback" not in log and outcome["server_rc"] == 0


def test_codex_over_a_websocket_runs_its_shell_tool(tmp_path, codex_bin):
    outcome = run_inside(tmp_path, SCRIPT, codex_runs(
        tmp_path, codex_bin, ["run the shell command and tell me what it printed"],
        provider=", supports_websockets = true"))
    [shell] = outcome["runs"]
    assert shell["rc"] == 0, shell["stderr"]
    [command] = items(shell, "command_execution")
    assert command["aggregated_output"].strip() == "mol-42"
    assert [m["text"] for m in items(shell, "agent_message")] == ["The command printed mol-42."]
    requests = outcome["requests"]
    assert all(r["status"] == 200 for r in requests), [r.get("error") for r in requests]
    assert transcript_problems(requests) == []
    first, answered = [r["body"] for r in requests if r["adapter"] == "L1"]
    # The second model call continued the first's conversation: it extends it byte for byte.
    assert answered["messages"][:len(first["messages"])] == first["messages"]
    assert "mol-42" in answered["messages"][-1]["content"]
    log = outcome["server_log"]
    # Every response went over one WebSocket (Codex warms it up with generate: false, then
    # sends only new items with previous_response_id): no reconnection, no HTTP fallback.
    assert log.count('"WebSocket /v1/responses" [accepted]') == 1
    assert "POST /v1/responses" not in log
    assert "Traceback" not in log and outcome["server_rc"] == 0
