"""An MCP server over real streamable HTTP (a subprocess on a loopback port)."""

from __future__ import annotations

import logging
import time

import anyio
import pytest

from mol.runtime.mcp import MCPManager

from .conftest import SLOW_START, wait_for

pytestmark = pytest.mark.anyio


async def test_http_server_tools_timeouts_changes_and_restarts(make_artifact, http_server, call_log,
                                                               caplog, monkeypatch):
    monkeypatch.setenv("MOL_TEST_TOKEN", "s3cret")
    artifact = make_artifact({"web": {
        "url": http_server.url, "tool_timeout_sec": 2, "startup_timeout_sec": SLOW_START,
        "bearer_token_env_var": "MOL_TEST_TOKEN", "http_headers": {"X-Team": "mol"}}})
    caplog.set_level(logging.WARNING, logger="mol.mcp")
    async with MCPManager(artifact) as mcp:
        tools = {t.name: t for t in await mcp.tools("L1")}
        status = mcp.status()[0]
        assert (status.transport, status.state, status.protocol_version) == ("http", "ready", "2026-07-28")
        assert tools["mcp__web__add"].source == "mcp:web"
        assert (await mcp.call("L1", "mcp__web__add", {"a": 20, "b": 22})).content == "42"
        assert "http POST auth='Bearer s3cret' team='mol'" in call_log.read_text()
        started = time.monotonic()
        hung = await mcp.call("L1", "mcp__web__hang", {})
        assert time.monotonic() - started < 3.0 and "timed out after 2s" in hung.content
        assert (await mcp.call("L1", "mcp__web__echo", {"text": "alive"})).content == "alive"
        # list_changed arrives on the 2026-07-28 subscription.
        await mcp.call("L1", "mcp__web__mutate", {})
        await wait_for(lambda: "changed tool 'echo'" in caplog.text)
        assert "mcp__web__echo" not in {t.name for t in await mcp.tools("L1")}
        # The server goes away mid-call: the call fails at once, not at its timeout.
        results = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: _append(results, mcp.call("L1", "mcp__web__hang", {})))
            await wait_for(lambda: call_log.read_text().count("call hang") == 2)
            killed = time.monotonic()
            http_server.kill()
        assert time.monotonic() - killed < 1.5
        assert results[0].is_error and "the connection closed" in results[0].content
        # Back on the same port: the next call reconnects.
        http_server.start()
        assert (await mcp.call("L1", "mcp__web__add", {"a": 1, "b": 1})).content == "2"
        assert mcp.status()[0].restarts >= 1


async def _append(results: list, call) -> None:
    results.append(await call)
