"""Fixtures for the MCP tests: artifacts naming real test servers, an HTTP server, process checks."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest

from mol.hcp.loader import load_text
from mol.runtime.mcp.process import group_members as group_members  # re-exported for tests
from mol.runtime.mcp.process import processes

from ...conftest import hcp_text
from ...services import NPM as NPM  # re-exported: the npm packages the tests pin

SERVER = Path(__file__).parent / "servers" / "scripted_server.py"
"""The test server (the SDK's ``MCPServer``), run as a script."""
SLOW_START = 60
"""Startup timeout for servers that are not under test: this 2-core machine is often busy."""


def stdio_server(*flags: str, **fields: object) -> dict:
    """An ``[mcp_servers.X]`` table running the scripted test server."""
    return {"command": sys.executable, "args": [str(SERVER), *flags], "env_vars": ["MOL_TEST_LOG"],
            "startup_timeout_sec": SLOW_START, **fields}


def time_server(**fields: object) -> dict:
    """``mcp-server-time`` from PyPI: a published server nobody here wrote."""
    return {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
            "startup_timeout_sec": SLOW_START, **fields}


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f'"{k}" = {_toml_value(v)}' for k, v in value.items()) + " }"
    return str(value)


def artifact_text(servers: dict[str, dict], adapters: dict[str, dict] | None = None) -> str:
    """HCP TOML with these MCP servers; by default L1 sees them all."""
    adapters = adapters or {"L1": {"mcp_servers": list(servers)}}
    lines = []
    for name, fields in adapters.items():
        lines.append(f"[adapters.{name}]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in fields.items()]
    for name, fields in servers.items():
        lines.append(f"[mcp_servers.{name}]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in fields.items()]
    return hcp_text("\n".join(lines), name="mcp-test", router_prompt="route")


@pytest.fixture
def make_artifact(tmp_path: Path) -> Callable[..., object]:
    """Build and load an artifact (written to ``tmp_path/mol.toml``)."""
    def make(servers: dict[str, dict], adapters: dict[str, dict] | None = None):
        path = tmp_path / "mol.toml"
        path.write_text(artifact_text(servers, adapters))
        return load_text(path.read_text(), base_dir=tmp_path, path=path)
    return make


@pytest.fixture
def call_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file the test server records calls and cancellations in."""
    path = tmp_path / "calls.log"
    path.touch()
    monkeypatch.setenv("MOL_TEST_LOG", str(path))
    return path


async def wait_for(condition: Callable[[], object], within: float = 10.0) -> None:
    """Wait until ``condition()`` is true (polling a file or log), failing after ``within`` s."""
    with anyio.fail_after(within):
        while not condition():  # noqa: ASYNC110 (the condition is outside this process)
            await anyio.sleep(0.02)


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live (non-zombie) process."""
    return any(p == pid and state != "Z" for p, state, _, _ in processes())


def children(pid: int) -> list[int]:
    """The child processes of ``pid``."""
    return [p for p, _, parent, _ in processes() if parent == pid]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HTTPServer:
    """The test server on streamable HTTP in a subprocess, on a fixed loopback port."""

    def __init__(self, *flags: str) -> None:
        self.flags = flags
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, str(SERVER), "--http", str(self.port), *self.flags],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + SLOW_START
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the HTTP test server did not start") from None
                time.sleep(0.05)

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture(params=[()])
def http_server(call_log: Path, request: pytest.FixtureRequest) -> Iterator[HTTPServer]:
    """A started ``HTTPServer`` (it records requests in ``call_log``); parametrize
    indirectly with flags (``("--legacy",)``) to change how it speaks."""
    server = HTTPServer(*request.param)
    server.start()
    try:
        yield server
    finally:
        server.kill()
