"""Attacks of a hostile MCP server (issue 14, items 1, 2 and 10): each failed before the fix.

The server (``servers/hostile_server.py``) writes raw JSON-RPC, so it can send
what no SDK would: a 15.9 MiB result of 640k empty blocks, schemas naming a
URL, catastrophic patterns, recursive references, ``setsid`` grandchildren.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from mol.runtime.mcp import MCPManager

from .conftest import SLOW_START, alive, wait_for

pytestmark = pytest.mark.anyio
HOSTILE = Path(__file__).parent / "servers" / "hostile_server.py"


def hostile(*flags: str, **fields: object) -> dict:
    return {"command": sys.executable, "args": [str(HOSTILE), *flags],
            "env_vars": ["MOL_TEST_REF_URL"], "startup_timeout_sec": SLOW_START, **fields}


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@asynccontextmanager
async def stall_meter():
    """Measures the longest the event loop went without running a 5 ms ticker."""
    worst = [0.0]

    async def tick() -> None:
        last = time.monotonic()
        while True:
            await anyio.sleep(0.005)
            now = time.monotonic()
            worst[0] = max(worst[0], now - last)
            last = now

    async with anyio.create_task_group() as tg:
        tg.start_soon(tick)
        yield worst
        tg.cancel_scope.cancel()


async def test_a_result_of_640k_empty_blocks_neither_stalls_the_loop_nor_fills_memory(make_artifact):
    async with MCPManager(make_artifact({"h": hostile()})) as mcp:
        await mcp.wait_ready()
        before = rss_mb()
        async with stall_meter() as worst:
            huge = await mcp.call("L1", "mcp__h__blocks", {"count": 640_000})
            many = await mcp.call("L1", "mcp__h__blocks", {"count": 300_000})  # 7.5 MiB, under the byte cap
            some = await mcp.call("L1", "mcp__h__blocks", {"count": 5_000})
        grown = rss_mb() - before
        after = await mcp.call("L1", "mcp__h__ok", {"text": "still here"})
    assert huge.is_error and "mol refused the server's answer" in huge.content
    assert "bytes or more" in huge.content
    assert many.is_error and "JSON objects and arrays" in many.content
    assert not some.is_error and "mol dropped 4488 more content blocks" in some.content
    assert not after.is_error  # the connection survived: only the calls failed
    # Before the fix: a 22 s stall and +1.3 GB. Generous bounds for a loaded 2-core machine.
    assert worst[0] < 1.0, f"the event loop stalled for {worst[0]:.2f}s"
    assert grown < 300, f"RSS grew by {grown:.0f} MB"


async def test_a_deep_nest_is_refused_without_crashing(make_artifact):
    async with MCPManager(make_artifact({"h": hostile()})) as mcp:
        deep = await mcp.call("L1", "mcp__h__nested", {"depth": 100_000})
        fine = await mcp.call("L1", "mcp__h__ok", {"text": "x"})
    assert deep.is_error and "mol refused" in deep.content
    assert not fine.is_error


class Listener:
    """A loopback TCP listener counting the connections it gets (a schema's URL target)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.hits = 0
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/schema.json"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.hits += 1
            conn.close()


async def test_broken_schemas_disable_their_tools_and_no_url_is_fetched(make_artifact, monkeypatch,
                                                                       caplog):
    target = Listener()
    monkeypatch.setenv("MOL_TEST_REF_URL", target.url)
    try:
        async with MCPManager(make_artifact({"h": hostile()})) as mcp:
            names = {t.name for t in await mcp.tools("L1")}
            [status] = mcp.status()
            refused = await mcp.call("L1", "mcp__h__remote_ref", {"x": 1})
    finally:
        target.sock.close()
    assert target.hits == 0
    assert {"mcp__h__ok", "mcp__h__redos"} <= names
    assert not names & {"mcp__h__remote_ref", "mcp__h__bad_regex", "mcp__h__self_ref"}
    disabled = status.disabled_tools
    assert "outside itself" in disabled["mcp__h__remote_ref"]
    assert "not a 'regex'" in disabled["mcp__h__bad_regex"] or "regular" in disabled["mcp__h__bad_regex"]
    assert "recurses without end" in disabled["mcp__h__self_ref"]
    assert refused.is_error and "unknown tool" in refused.content
    assert "tool 'remote_ref' disabled" in caplog.text


async def test_a_catastrophic_pattern_is_a_tool_error_within_its_budget(make_artifact):
    async with MCPManager(make_artifact({"h": hostile()})) as mcp:
        await mcp.wait_ready()
        started = time.monotonic()
        async with stall_meter() as worst:
            bomb = await mcp.call("L1", "mcp__h__redos", {"x": "a" * 40 + "!"})
        took = time.monotonic() - started
        fine = await mcp.call("L1", "mcp__h__redos", {"x": "aaaa"})
    assert bomb.is_error and "took longer than" in bomb.content
    assert took < 5 and worst[0] < 1.0
    assert not fine.is_error


async def test_null_optionals_are_dropped_and_messages_speak_json(make_artifact):
    async with MCPManager(make_artifact({"h": hostile()})) as mcp:
        dropped = await mcp.call("L1", "mcp__h__ok", '{"text": "t", "verbose": null}')
        missing = await mcp.call("L1", "mcp__h__ok", '{"text": null}')
        typed = await mcp.call("L1", "mcp__h__ok", '{"text": "t", "verbose": "yes"}')
    assert dropped.content == 'ok {"text": "t"}'
    assert missing.is_error and 'text: null is not of type "string"' in missing.content
    assert typed.is_error and '"yes" is not of type "boolean"' in typed.content
    assert "None" not in missing.content


async def test_a_setsid_grandchild_ends_with_the_session(make_artifact):
    async with MCPManager(make_artifact({"h": hostile()})) as mcp:
        result = await mcp.call("L1", "mcp__h__spawn", {})
        grandchild = int(result.content)
        assert alive(grandchild)
        assert os.getpgid(grandchild) != mcp.status()[0].pid  # it left the server's group
    await wait_for(lambda: not alive(grandchild), within=5)


DRIVER = """
import anyio, sys
from mol.hcp.loader import load
from mol.runtime.mcp import MCPManager

async def main():
    async with MCPManager(load(sys.argv[1])) as mcp:
        result = await mcp.call("L1", "mcp__h__spawn", {})
        print(mcp.status()[0].pid, result.content, flush=True)
        await anyio.sleep(600)

anyio.run(main)
"""


def run_and_kill(hcp: Path) -> tuple[int, int]:
    """Start a runtime whose server spawned a grandchild, SIGKILL it: (server, grandchild)."""
    with subprocess.Popen([sys.executable, "-c", DRIVER, str(hcp)], stdout=subprocess.PIPE,
                          text=True) as runtime:
        try:
            server, grandchild = map(int, runtime.stdout.readline().split())
        finally:
            runtime.send_signal(signal.SIGKILL)
            runtime.wait(10)
    return server, grandchild


async def test_servers_of_a_killed_runtime_die_with_it_or_at_the_next_start(make_artifact, tmp_path):
    make_artifact({"h": hostile()})
    server, grandchild = run_and_kill(tmp_path / "mol.toml")
    await wait_for(lambda: not alive(server), within=5)  # PR_SET_PDEATHSIG
    assert alive(grandchild)  # re-parented away: only its marker still ties it to mol
    async with MCPManager(make_artifact({"h": hostile(enabled=False)})):
        await wait_for(lambda: not alive(grandchild), within=10)
