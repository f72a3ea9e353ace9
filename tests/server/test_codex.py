"""Codex CLI (npm ``@openai/codex``, ``wire_api = "responses"``) against ``mol serve``, with
its default features: every tool it sends (function tools, the ``multi_agent_v1``
namespace, the hosted ``web_search``), ``store: false``, the whole input replayed on each
request. Codex, the scripted engine and ``mol serve`` run in a network namespace with
loopback only, so nothing Codex tries (update checks, telemetry) reaches outside."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import KEY, transcript_problems, write_hcp

pytestmark = [pytest.mark.slow, pytest.mark.npm("@openai/codex")]

PACKAGE = "@openai/codex@0.169.0"
CACHE = Path(os.environ.get("MOL_TEST_NPM_CACHE", Path.home() / ".cache" / "mol-tests" / "npm"))
INSIDE = Path(__file__).with_name("codex_inside.py")

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
    launcher = CACHE / "node_modules" / ".bin" / "codex"
    if not launcher.exists():
        assert shutil.which("npm"), "npm is needed to install Codex CLI"
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix",
                        str(CACHE), PACKAGE], check=True, capture_output=True, timeout=900)
    return launcher


def run_inside(tmp_path: Path, codex: Path, prompts: list[str]) -> dict:
    """The scripted engine, ``mol serve`` and one ``codex exec`` per prompt, all in a
    loopback-only network namespace; their outcome (``codex_inside.py``)."""
    (tmp_path / "home").mkdir()
    (tmp_path / "work").mkdir()
    key = tmp_path / "key"
    key.write_text(KEY + "\n")
    key.chmod(0o600)
    (tmp_path / "script.toml").write_text(SCRIPT)
    plan = {"script": str(tmp_path / "script.toml"), "hcp": str(write_hcp(tmp_path)),
            "key_file": str(key), "codex": str(codex), "home": str(tmp_path / "home"),
            "work": str(tmp_path / "work"), "server_log": str(tmp_path / "server.log"),
            "out": str(tmp_path / "out.json"), "prompts": prompts}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    done = subprocess.run(
        ["unshare", "--net", "--", "sh", "-c",
         f'ip link set lo up && exec "{sys.executable}" "{INSIDE}" "{tmp_path / "plan.json"}"'],
        capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    outcome = json.loads((tmp_path / "out.json").read_text())
    outcome["server_log"] = (tmp_path / "server.log").read_text()
    return outcome


def items(run: dict, kind: str) -> list[dict]:
    return [e["item"] for e in run["events"]
            if e.get("type") == "item.completed" and e["item"].get("type") == kind]


def test_codex_exec_answers_and_runs_its_own_shell_tool(tmp_path, codex_bin):
    outcome = run_inside(tmp_path, codex_bin, [
        "say hi", "run the shell command and tell me what it printed"])
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
