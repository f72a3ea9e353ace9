"""MCP servers over real stdio: both protocol eras, a published server, failures, pins."""

from __future__ import annotations

import logging
import os
import signal
import time

import anyio
import pytest

from mol.core.errors import MCPStartupError
from mol.runtime.mcp import MCPManager
from mol.runtime.mcp.sdk import load as load_sdk

from .conftest import alive, group_members, stdio_server, time_server, wait_for

pytestmark = pytest.mark.anyio


async def test_both_eras_and_a_published_server(make_artifact):
    """Two test servers with the same tools (one speaking only the older handshake) and
    mcp-server-time from PyPI, side by side."""
    artifact = make_artifact({"new": stdio_server(), "old": stdio_server("--legacy"),
                              "time": time_server()})
    async with MCPManager(artifact, max_result_chars=2000) as mcp:
        tools = {t.name: t for t in await mcp.tools("L1")}
        status = {s.name: s for s in mcp.status()}
        assert status["new"].protocol_version == "2026-07-28"
        assert status["old"].protocol_version == "2025-11-25"  # fell back to initialize
        assert status["time"].state == "ready"
        # Same tool name on two servers: two tools, each reaching its own server.
        assert {"mcp__new__pid", "mcp__old__pid"} <= tools.keys()
        assert tools["mcp__new__pid"].source == "mcp:new"
        assert (await mcp.call("L1", "mcp__new__pid", {})).content == str(status["new"].pid)
        assert (await mcp.call("L1", "mcp__old__pid", {})).content == str(status["old"].pid)
        assert (await mcp.call("L1", "mcp__old__add", '{"a": 2, "b": 40}')).content == "42"
        now = await mcp.call("L1", "mcp__time__get_current_time", {"timezone": "UTC"})
        assert not now.is_error and '"timezone": "UTC"' in now.content
        image = await mcp.call("L1", "mcp__new__image", {})
        assert image.content == "[image: image/png, 1234 bytes]"
        failed = await mcp.call("L1", "mcp__new__fail", {"message": "disk full"})
        assert failed.is_error and "disk full" in failed.content
        big = await mcp.call("L1", "mcp__old__big", {"size": 100_000})
        assert len(big.content) < 2200 and "mol dropped" in big.content
        assert tools["mcp__time__get_current_time"].parameters["type"] == "object"
        invalid = await mcp.call("L1", "mcp__new__add", {"a": "x", "b": 1})
        assert invalid.is_error and '"x" is not of type "integer"' in invalid.content


async def test_hung_tool_times_out_cancels_and_the_session_stays_usable(make_artifact, call_log):
    artifact = make_artifact({"s": stdio_server(tool_timeout_sec=1)})
    async with MCPManager(artifact) as mcp:
        await mcp.wait_ready()
        started = time.monotonic()
        result = await mcp.call("L1", "mcp__s__hang", {})
        assert time.monotonic() - started < 2.0
        assert result.is_error and "timed out after 1s" in result.content
        # The server was told: its handler was cancelled.
        await wait_for(lambda: "cancelled hang" in call_log.read_text())
        assert (await mcp.call("L1", "mcp__s__echo", {"text": "still here"})).content == "still here"
        # Progress every 50 ms does not extend the deadline.
        started = time.monotonic()
        result = await mcp.call("L1", "mcp__s__progress_forever", {})
        assert time.monotonic() - started < 2.0 and "timed out" in result.content
        assert (await mcp.call("L1", "mcp__s__add", {"a": 1, "b": 1})).content == "2"


async def test_killed_server_fails_the_call_fast_and_restarts(make_artifact, call_log):
    artifact = make_artifact({"s": stdio_server(tool_timeout_sec=30)})
    async with MCPManager(artifact) as mcp:
        await mcp.wait_ready()
        first_pid = mcp.status()[0].pid
        results = []

        async def hung_call():
            results.append(await mcp.call("L1", "mcp__s__hang", {}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(hung_call)
            await wait_for(lambda: "call hang" in call_log.read_text())
            killed = time.monotonic()
            os.kill(first_pid, signal.SIGKILL)
        assert time.monotonic() - killed < 2.0
        assert results[0].is_error and "was killed by signal SIGKILL" in results[0].content
        assert mcp.status()[0].state == "down"
        # The next call restarts the server and succeeds.
        assert (await mcp.call("L1", "mcp__s__echo", {"text": "back"})).content == "back"
        status = mcp.status()[0]
        assert status.restarts == 1 and status.pid != first_pid and not alive(first_pid)
        # A server that exits by itself mid-call: same story.
        started = time.monotonic()
        died = await mcp.call("L1", "mcp__s__die", {})
        assert time.monotonic() - started < 2.0 and "exited with status 3" in died.content
        assert (await mcp.call("L1", "mcp__s__echo", {"text": "again"})).content == "again"


async def test_garbage_on_stdout_is_an_error_not_a_hang(make_artifact):
    artifact = make_artifact({"s": stdio_server(tool_timeout_sec=30),
                              "banner": stdio_server("--banner")})
    async with MCPManager(artifact) as mcp:
        await mcp.wait_ready()
        started = time.monotonic()
        result = await mcp.call("L1", "mcp__s__garbage", {})
        assert time.monotonic() - started < 2.0
        assert result.is_error and "not JSON-RPC" in result.content and "this is not json" in result.content
        assert (await mcp.call("L1", "mcp__s__echo", {"text": "ok"})).content == "ok"
        banner = next(s for s in mcp.status() if s.name == "banner")
        assert banner.state == "failed" and "Starting scripted server" in banner.error


async def test_startup_failures_silent_required_and_optional(make_artifact):
    artifact = make_artifact(
        {"silent": stdio_server("--silent", startup_timeout_sec=1),
         "crashy": stdio_server("--crash", required=True),
         "fine": stdio_server()},
        adapters={"L1": {"mcp_servers": ["silent", "fine"]}, "L2": {"mcp_servers": ["crashy"]},
                  "L3": {"mcp_servers": ["silent"]}})
    await load_sdk()  # mol's one-time SDK import is not the server's startup
    started = time.monotonic()
    async with MCPManager(artifact) as mcp:
        assert await mcp.tools("L3") == []
        assert time.monotonic() - started < 2.0  # startup_timeout_sec = 1
        tools = await mcp.tools("L1")  # L1 does not see the required server
        silent = next(s for s in mcp.status() if s.name == "silent")
        assert silent.state == "failed" and "startup_timeout_sec=1s" in silent.error
        assert {t.source for t in tools} == {"mcp:fine"}
        with pytest.raises(MCPStartupError, match=r"'crashy'.*status 4.*configuration file missing"):
            await mcp.wait_ready()
        with pytest.raises(MCPStartupError, match="crashy"):
            await mcp.tools("L2")
    assert time.monotonic() - started < 30


async def test_allowlist_hides_a_tool_even_by_name(make_artifact, call_log):
    artifact = make_artifact({"s": stdio_server(enabled_tools=["echo", "secret", "add"],
                                                disabled_tools=["secret"])})
    async with MCPManager(artifact) as mcp:
        names = {t.name for t in await mcp.tools("L1")}
        assert names == {"mcp__s__echo", "mcp__s__add"}
        refused = await mcp.call("L1", "mcp__s__secret", {})
        assert refused.is_error and "unknown tool" in refused.content
        refused = await mcp.call("L1", "mcp__s__hang", {})
        assert refused.is_error
        assert "secret" not in call_log.read_text() and "hang" not in call_log.read_text()


async def test_changed_tool_definition_is_disabled_for_the_session(make_artifact, caplog):
    """A rug pull, announced by list_changed in either era, disables the tool."""
    artifact = make_artifact({"new": stdio_server(), "old": stdio_server("--legacy")})
    caplog.set_level(logging.WARNING, logger="mol.mcp")
    async with MCPManager(artifact) as mcp:
        echo = {t.name: t for t in await mcp.tools("L1")}["mcp__new__echo"]
        for server in ("new", "old"):
            assert (await mcp.call("L1", f"mcp__{server}__mutate", {})).content == "mutated"
            await wait_for(lambda s=server: f"MCP server '{s}' changed tool 'echo'" in caplog.text)
            assert f"mcp__{server}__echo" not in {t.name for t in await mcp.tools("L1")}
        assert all("echo" in "".join(s.disabled_tools) for s in mcp.status())
        # A Tool object handed out before the change refuses too.
        result = await echo.call({"text": "x"}, None)
        assert result.is_error and "disabled for this session" in result.content
        assert (await mcp.call("L1", "mcp__old__add", {"a": 1, "b": 2})).content == "3"
    assert any(r.name == "mol.mcp" and r.levelno == logging.WARNING for r in caplog.records)


async def test_resources_prompts_and_the_resource_tool(make_artifact):
    servers = {"docs": stdio_server(), "time": time_server()}
    adapters = {"L1": {"mcp_servers": ["docs", "time"],
                       "tools": {"allow": ["mcp__docs__read_resource", "mcp__time__read_resource"]}},
                "L2": {"mcp_servers": ["docs"], "tools": {"allow": ["mcp__docs__*"]}}}
    artifact = make_artifact(servers, adapters)
    async with MCPManager(artifact) as mcp:
        resources = await mcp.resources()
        assert [(s, str(r.uri)) for s, r in resources] == [("docs", "memo://readme")]
        assert (await mcp.read_resource("docs", "memo://readme")).content == "Read me: the answer is 42."
        prompts = await mcp.prompts()
        assert [(s, p.name) for s, p in prompts] == [("docs", "greet")]
        rendered = await mcp.get_prompt("docs", "greet", {"name": "Ann"})
        assert rendered.messages[0].content.text == "Please greet Ann warmly."
        # Allowed by exact name: the tool exists (time has no resources, so no tool for it).
        l1 = {t.name: t for t in await mcp.tools("L1")}
        assert "mcp__docs__read_resource" in l1 and "mcp__time__read_resource" not in l1
        assert "memo://readme" in l1["mcp__docs__read_resource"].description
        read = await mcp.call("L1", "mcp__docs__read_resource", {"uri": "memo://readme"})
        assert read.content == "Read me: the answer is 42."
        # A glob does not grant it.
        assert "mcp__docs__read_resource" not in {t.name for t in await mcp.tools("L2")}


async def test_no_server_process_survives_the_session(make_artifact):
    artifact = make_artifact({"a": stdio_server(), "b": stdio_server("--legacy"), "t": time_server()})
    async with MCPManager(artifact) as mcp:
        await mcp.wait_ready()
        groups = [s.pid for s in mcp.status()]
        child = int((await mcp.call("L1", "mcp__a__spawn_child", {})).content)
        assert alive(child) and all(group_members(g) for g in groups)
    assert not alive(child)
    assert [group_members(g) for g in groups] == [[], [], []]
