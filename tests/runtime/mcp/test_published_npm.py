"""A published MCP server nobody here wrote, on the older protocol era: the reference
`@modelcontextprotocol/server-everything` (TypeScript SDK) from npm, over stdio."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from mol.hcp.loader import load
from mol.plugins.manager import PluginManager
from mol.runtime import open_runtime
from mol.runtime.mcp import MCPManager
from mol.runtime.testing import ScriptedEngine

pytestmark = [pytest.mark.anyio, pytest.mark.npm("@modelcontextprotocol/server-everything")]
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

PACKAGE = "@modelcontextprotocol/server-everything@2026.8.31"
CACHE = Path(os.environ.get("MOL_TEST_NPM_CACHE", Path.home() / ".cache" / "mol-tests" / "npm"))


@pytest.fixture(scope="module")
def everything() -> Path:
    """The server's entry script, installed from npm once per machine."""
    script = CACHE / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist"
    if not (script / "index.js").exists():
        assert shutil.which("npm"), "npm is needed to install the published MCP server"
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix",
                        str(CACHE), PACKAGE], check=True, capture_output=True, timeout=600)
    return script / "index.js"


def artifact(folder: Path, script: Path):
    path = folder / "everything.toml"
    path.write_text(f"""schema_version = 1
name = "everything"
[engine]
api_base = "http://127.0.0.1:9/v1"
max_retries = 0
[router]
prompt = "Route."
[mcp_servers.everything]
command = "node"
args = ["{script}", "stdio"]
startup_timeout_sec = 30
[adapters.L1]
prompt = "You act."
mcp_servers = ["everything"]
tools.allow = ["mcp__everything__get-sum", "mcp__everything__echo",
               "mcp__everything__get-tiny-image", "mcp__everything__toggle-subscriber-updates"]
""")
    return load(path)


async def test_older_era_server_tools_resources_and_prompts(everything, tmp_path):
    async with MCPManager(artifact(tmp_path, everything)) as mcp:
        tools = {t.name for t in await mcp.tools("L1")}
        [status] = mcp.status()
        assert status.state == "ready" and status.protocol_version < "2026"
        assert {"mcp__everything__get-sum", "mcp__everything__echo",
                "mcp__everything__get-env"} <= tools
        echoed = await mcp.call("L1", "mcp__everything__echo", {"message": "hello"})
        assert echoed.content == "Echo: hello" and not echoed.is_error
        image = await mcp.call("L1", "mcp__everything__get-tiny-image", {})
        assert "image/png" in image.content
        bad = await mcp.call("L1", "mcp__everything__get-sum", '{"a": "one"}')
        assert bad.is_error
        assert await mcp.resources() and await mcp.prompts()
        pid = status.pid
    assert not await anyio.Path(f"/proc/{pid}").exists()  # no survivor after the session


async def test_a_turn_where_l1_calls_the_published_server(everything, tmp_path):
    script = """
[[L0]]
constrained = true
reply = "L1"
[[L1]]
tool_calls = [{ name = "mcp__everything__get-sum", arguments = { a = 19, b = 23 } }]
[[L1]]
when = "42"
tool_calls = [{ name = "mcp__everything__get-env", arguments = {} }]
[[L1]]
when = "not available"
reply = "19 + 23 = 42"
[[L0]]
constrained = false
times = -1
reply = "L1 added."
"""
    hcp = artifact(tmp_path, everything)
    async with ScriptedEngine.serve(script) as engine:
        async with open_runtime(hcp, engine_url=engine.base_url,
                                plugins=PluginManager(None, builtin=())) as runtime, \
                runtime.session() as harness:
            result = await harness.turn("what is 19 + 23?")
    assert result.answer == "19 + 23 = 42"
    summed, refused = [e for e in result.events if e.type == "tool_result"]
    assert "42" in summed.content and not summed.is_error
    assert refused.is_error and "not available to you" in refused.content  # policy hides it
    listed = [t["function"]["name"] for t in engine.requests_for("L1")[0]["body"]["tools"]]
    assert "mcp__everything__get-env" not in listed and "mcp__everything__get-sum" in listed
    second = engine.requests_for("L1")[1]["body"]["messages"]
    assert second[-1]["role"] == "tool" and "42" in second[-1]["content"]
    assert json.loads(second[-2]["tool_calls"][0]["function"]["arguments"]) == {"a": 19, "b": 23}


def capable_artifact(folder: Path, script: Path, engine_url: str):
    """The everything server with sampling offered (it shows its sampling, elicitation and
    roots tools only to clients declaring those capabilities)."""
    path = folder / "capable.toml"
    (folder / "notes").mkdir(exist_ok=True)
    path.write_text(f"""schema_version = 1
name = "everything"
[engine]
api_base = "{engine_url}"
max_retries = 0
[router]
prompt = "Route."
[mcp_servers.everything]
command = "node"
args = ["{script}", "stdio"]
startup_timeout_sec = 30
sampling = {{ adapter = "L0", max_tokens = 32 }}
roots = ["notes"]
[adapters.L1]
mcp_servers = ["everything"]
""")
    return load(path)


async def test_sampling_elicitation_and_roots_with_the_published_server(everything, tmp_path):
    script = """
[[L0]]
when = "Resource trigger-sampling-request context: name a color"
reply = "teal"
usage = { prompt_tokens = 11, completion_tokens = 1 }
"""
    asked = []

    async def ask(server: str, request: dict) -> dict:
        asked.append(request)
        return {"action": "accept", "content": {"name": "Ada"}}

    async with ScriptedEngine.serve(script) as engine:
        hcp = capable_artifact(tmp_path, everything, engine.base_url)
        async with MCPManager(hcp, elicit=ask) as mcp:
            names = {t.name for t in await mcp.tools("L1")}
            sampled = await mcp.call("L1", "mcp__everything__trigger-sampling-request",
                                     {"prompt": "name a color", "maxTokens": 500})
            elicited = await mcp.call("L1", "mcp__everything__trigger-elicitation-request", {})
            roots = await mcp.call("L1", "mcp__everything__get-roots-list", {})
    assert {"mcp__everything__trigger-sampling-request", "mcp__everything__get-roots-list",
            "mcp__everything__trigger-elicitation-request"} <= names
    assert '"text": "teal"' in sampled.content and '"model": "L0"' in sampled.content
    [request] = engine.requests_for("L0")
    assert request["body"]["max_tokens"] == 32  # the server asked for 500
    assert asked and "User provided the requested information" in elicited.content
    assert (tmp_path / "notes").as_uri() in roots.content


async def test_without_the_capabilities_the_published_server_hides_those_tools(everything, tmp_path):
    async with MCPManager(artifact(tmp_path, everything)) as mcp:
        names = {t.name for t in await mcp.tools("L1")}
    assert "mcp__everything__trigger-sampling-request" not in names  # sampling not offered
    assert "mcp__everything__get-roots-list" in names  # roots and elicitation always are


async def test_a_resource_subscription_brings_the_servers_updates(everything, tmp_path):
    async with MCPManager(artifact(tmp_path, everything)) as mcp:
        await mcp.wait_ready()
        server = mcp.servers["everything"]
        conn = await server.connection()
        [(_, first), *_] = await mcp.resources()
        seen, noted = anyio.Event(), conn.on_change

        async def noting(connection: Any, what: str) -> None:
            await noted(connection, what)
            if str(first.uri) in server.updated:
                seen.set()

        conn.on_change = noting
        await conn.subscribe(str(first.uri))
        # The reference server then sends resources/updated for each subscribed URI (at
        # once, then every 5 s) once its simulated updates are switched on.
        toggled = await mcp.call("L1", "mcp__everything__toggle-subscriber-updates", {})
        assert "Started" in toggled.content, toggled.content
        with anyio.fail_after(20):
            await seen.wait()
