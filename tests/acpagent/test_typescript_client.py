"""``mol acp`` driven by the TypeScript SDK's client (npm ``@agentclientprotocol/sdk``, the
app API that replaced ``ClientSideConnection`` in 2.x), spawned as a Node script: the same
story as with the Python client, checked by another implementation of the protocol."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mol.runtime.testing import ScriptedEngine

from .conftest import CLOCK, SCRIPT, npm_prefix, write_hcp

pytestmark = [pytest.mark.slow, pytest.mark.npm("@agentclientprotocol/sdk")]

PACKAGE = "@agentclientprotocol/sdk@2.4.0"
CLIENT = __file__.rsplit("/", 1)[0] + "/ts_client.mjs"


def messages(updates: list[dict], kind: str) -> str:
    return "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == kind)


def statuses(updates: list[dict]) -> list[list[str]]:
    """Each tool call's statuses, in the order the calls began."""
    calls: dict[str, list[str]] = {}
    for update in updates:
        if update["sessionUpdate"] in ("tool_call", "tool_call_update"):
            calls.setdefault(update["toolCallId"], []).append(update["status"])
    return list(calls.values())


def test_the_typescript_client_drives_a_session_and_loads_it_again(tmp_path):
    prefix = npm_prefix(PACKAGE)
    with ScriptedEngine.serve(SCRIPT) as engine:
        plan = {"prefix": str(prefix), "cwd": str(tmp_path), "clock": CLOCK,
                "log": str(tmp_path / "mol.log"),
                "command": [sys.executable, "-m", "mol.cli", "acp", "--hcp",
                            str(write_hcp(tmp_path)), "--engine-url", engine.base_url]}
        done = subprocess.run(["node", CLIENT, json.dumps(plan)], capture_output=True,
                              text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:] + (tmp_path / "mol.log").read_text()[-3000:]
    seen = json.loads(done.stdout)
    first, second = seen["first"], seen["second"]
    assert first["exitCode"] == second["exitCode"] == 0
    result = first["result"]
    assert result["init"]["protocolVersion"] == 1
    assert result["init"]["agentCapabilities"]["loadSession"] is True
    assert result["stops"] == ["end_turn", "end_turn", "end_turn", "cancelled"]
    assert result["badParams"]["code"] == -32602
    assert "sessionId: no session 'conv_nowhere' is open here" in result["badParams"]["message"]
    updates = first["updates"]
    assert updates[0]["sessionUpdate"] == "available_commands_update"
    assert messages(updates, "agent_message_chunk") == (
        "Hello from L1.The clock answered.You kept the clock from me.")
    assert messages(updates, "agent_thought_chunk") == "a greeting"
    assert [p["options"] for p in first["permissions"]] == [
        ["allow_once", "allow_always", "reject_once", "reject_always"]] * 2
    assert first["permissions"][0]["toolCall"]["rawInput"] == {"timezone": "UTC"}
    # allowed, rejected, and the slow turn's call (allowed by policy: never asked)
    assert statuses(updates) == [["pending", "in_progress", "completed"], ["pending", "failed"],
                                 ["pending", "completed"]]
    replayed = second["updates"]
    assert len(replayed) == second["result"]["replayed"]
    assert [u["content"]["text"] for u in replayed if u["sessionUpdate"] == "user_message_chunk"
            ] == ["hello there", "clock please", "clock please", "a slow one"]
    assert messages(replayed, "agent_message_chunk") == messages(updates, "agent_message_chunk")
    assert statuses(replayed) == statuses(updates)
