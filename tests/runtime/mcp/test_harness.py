"""A turn through the harness: L1 calls an MCP tool and the result returns to L1."""

from __future__ import annotations

import os

import pytest

from mol.plugins.manager import PluginManager
from mol.runtime import Runtime
from mol.runtime.mcp import MCPManager
from mol.runtime.testing import ScriptedEngine

from .conftest import stdio_server

pytestmark = pytest.mark.anyio
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

SCRIPT = """
[[L0]]
constrained = true
reply = "L1"

[[L1]]
tool_calls = [{ name = "mcp__s__add", arguments = { a = 40, b = 2 } }]

[[L1]]
when = "42"
tool_calls = [{ name = "mcp__s__secret", arguments = {} }]

[[L1]]
reply = "The sum is 42."

[[L0]]
constrained = false
times = -1
reply = "L1 added two numbers."
"""


async def test_l1_calls_an_mcp_tool_and_gets_the_result(make_artifact, call_log):
    artifact = make_artifact(
        {"s": stdio_server(enabled_tools=["add", "echo"])},
        adapters={"L0": {"prompt": "Route."},
                  "L1": {"prompt": "You act.", "mcp_servers": ["s"],
                         "tools": {"allow": ["mcp__s__*"]}}})
    async with ScriptedEngine.serve(SCRIPT) as engine, MCPManager(artifact) as mcp:
        plugins = PluginManager(None, builtin=())
        runtime = Runtime(artifact, engine_url=engine.base_url, plugins=plugins,
                          toolsets=[mcp])
        async with runtime.session() as harness:
            result = await harness.turn("what is 40 + 2?")
    assert (result.adapter, result.answer) == ("L1", "The sum is 42.")
    l1 = [r["body"] for r in engine.requests_for("L1")]
    assert {t["function"]["name"] for t in l1[0]["tools"]} == {"mcp__s__add", "mcp__s__echo"}
    # The MCP result went back to L1, as the tool message answering its call.
    call_id = l1[1]["messages"][-2]["tool_calls"][0]["id"]
    assert l1[1]["messages"][-1] == {"role": "tool", "tool_call_id": call_id, "content": "42"}
    # The tool hidden by enabled_tools was refused by name and never reached the server.
    refused = l1[2]["messages"][-1]
    assert refused["role"] == "tool" and "secret" in refused["content"]
    assert "call add 40 2" in call_log.read_text() and "secret" not in call_log.read_text()
    assert engine.unused_rules() == []
