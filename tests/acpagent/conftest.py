"""``mol acp`` as an editor runs it: a subprocess on stdio, driven by the official Python SDK's
client (``agent-client-protocol``), against the scripted engine.

``Editor`` is the editor's side: it records every ``session/update``, answers permission
requests from a list it is given, and serves a real folder and real terminals (processes
on this machine) when mol asks for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import acp
import anyio
from acp import schema

from ..conftest import hcp_text
from ..runtime.mcp.conftest import HTTPServer
from ..services import npm_package

__all__ = ["HTTPServer"]

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

SCRIPT = """
[[L0]]
constrained = true
when = "slow"
times = -1
reply = "L2"
[[L0]]
constrained = true
times = -1
reply = "L1"
[[L1]]
when = "clock please"
times = -1
tool_calls = [{ name = "mcp__clock__get_current_time", arguments = { timezone = "UTC" } }]
[[L1]]
when = '"datetime"'
times = -1
reply = "The clock answered."
[[L1]]
when = "did not approve"
times = -1
reply = "You kept the clock from me."
[[L1]]
when = "echo please"
tool_calls = [{ name = "mcp__web__echo", arguments = { text = "via http" } }]
[[L1]]
when = "^via http$"
reply = "The web server echoed."
[[L1]]
times = -1
reasoning = "a greeting"
reply = "Hello from L1."
[[L2]]
when = "slow"
tool_calls = [{ name = "mcp__clock__convert_time", arguments = { source_timezone = "UTC", time = "12:00", target_timezone = "Europe/Paris" } }]
[[L2]]
times = -1
delay = 60
reply = "too late"
[[L0]]
constrained = false
times = -1
reply = "summary"
"""
"""Routes ``slow`` to L2 (a tool call, then an answer a minute away), all else to L1: a
greeting, the clock's ``get_current_time`` (an ``ask`` tool) and what its result says, or
the ``web`` server's ``echo``."""

CLOCK = {"name": "clock", "command": sys.executable,
         "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"], "env": []}
"""The editor's MCP server (ACP's stdio shape): ``mcp-server-time`` from PyPI."""


SENT_BY_MOL = {
    "session/update": schema.SessionNotification,
    "session/request_permission": schema.RequestPermissionRequest,
    "fs/read_text_file": schema.ReadTextFileRequest,
    "fs/write_text_file": schema.WriteTextFileRequest,
    "terminal/create": schema.CreateTerminalRequest,
    "terminal/output": schema.TerminalOutputRequest,
    "terminal/wait_for_exit": schema.WaitForTerminalExitRequest,
    "terminal/kill": schema.KillTerminalRequest,
    "terminal/release": schema.ReleaseTerminalRequest,
}
"""The SDK's model of each message mol sends the editor."""
ANSWERED_BY_MOL = {
    "initialize": schema.InitializeResponse,
    "session/new": schema.NewSessionResponse,
    "session/load": schema.LoadSessionResponse,
    "session/prompt": schema.PromptResponse,
}
"""The SDK's model of mol's answer to each of the editor's requests."""


def write_hcp(folder: Path, extra: str = "") -> Path:
    """The test artifact: L1 asks before the clock's ``get_current_time`` and may call the
    ``web`` server's ``echo``, L2 may convert times without asking; sessions are stored in
    ``folder``."""
    path = folder / "mol.toml"
    path.write_text(hcp_text(f"""\
[engine]
api_base = "http://127.0.0.1:9/v1"
timeout_sec = 90
max_retries = 0
[adapters.L0]
prompt = "You chat."
[adapters.L1]
prompt = "You act."
tools.ask = ["mcp__clock__get_current_time"]
tools.allow = ["mcp__web__echo"]
[adapters.L2]
prompt = "You code."
tools.allow = ["mcp__clock__convert_time"]
[adapters.L3]
prompt = "You draw."
[session]
store = "sqlite:///{folder / 'sessions.db'}"
""", extra), encoding="utf-8")
    return path


class Editor:
    """The editor's side of ACP, as the Python SDK's ``Client``."""

    def __init__(self, folder: Path, answers: list[str] | None = None) -> None:
        self.folder = folder
        self.answers = list(answers or [])
        """Option ids to answer permission requests with, in order."""
        self.updates: list[dict[str, Any]] = []
        self.permissions: list[dict[str, Any]] = []
        self.messages: list[dict[str, Any]] = []
        """Every message mol sent, as it came over the wire."""
        self.asked: dict[Any, str] = {}
        """The method of each request the editor sent, by id."""
        self.changed = asyncio.Event()
        self.terminals: dict[str, dict[str, Any]] = {}

    def on_connect(self, conn: Any) -> None:
        """Nothing to do when connected."""

    def seen(self, event: Any) -> None:
        """The connection's observer: keep what mol sent, and the editor's requests."""
        if event.direction.value == "incoming":
            self.messages.append(event.message)
        elif "method" in event.message and "id" in event.message:
            self.asked[event.message["id"]] = event.message["method"]

    def unconforming(self) -> list[str]:
        """What mol sent that the SDK's models do not read back as sent: a field they do not
        know, a value they would drop or change (the models forgive much, so each message is
        read and written back, and must come out the same)."""
        wrong = []
        for message in self.messages:
            if "method" in message:
                model, data = SENT_BY_MOL.get(message["method"]), message.get("params")
            elif "result" in message:
                model, data = ANSWERED_BY_MOL.get(self.asked.get(message["id"], "")), message[
                    "result"]
            else:
                continue  # an error: its own tests read it
            if model is None:
                wrong.append(f"no model for {message}")
                continue
            back = model.model_validate(data).model_dump(mode="json", by_alias=True,
                                                         exclude_unset=True)
            if back != data:
                wrong.append(f"{model.__name__}: sent {data}, read back {back}")
        return wrong

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update.model_dump(mode="json", by_alias=True, exclude_none=True))
        self.changed.set()

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any],
                                 **kwargs: Any) -> schema.RequestPermissionResponse:
        self.permissions.append({"toolCall": tool_call.model_dump(mode="json", by_alias=True,
                                                                  exclude_none=True),
                                 "options": [o.option_id for o in options]})
        if not self.answers:
            raise AssertionError("mol asked for a permission the test did not expect")
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(outcome="selected", option_id=self.answers.pop(0)))

    async def wait_for(self, predicate: Any) -> dict[str, Any]:
        """The first update ``predicate`` accepts, once it arrived."""
        while True:
            for update in self.updates:
                if predicate(update):
                    return update
            self.changed.clear()
            await self.changed.wait()

    # -- the editor's folder and terminals --------------------------------------------------

    async def read_text_file(self, session_id: str, path: str, line: int | None = None,
                             limit: int | None = None, **kwargs: Any) -> Any:
        try:
            return schema.ReadTextFileResponse(content=await anyio.Path(path).read_text())
        except FileNotFoundError:
            raise acp.RequestError.resource_not_found(path) from None

    async def write_text_file(self, session_id: str, path: str, content: str,
                              **kwargs: Any) -> Any:
        await anyio.Path(path).parent.mkdir(parents=True, exist_ok=True)
        await anyio.Path(path).write_text(content)
        return schema.WriteTextFileResponse()

    async def create_terminal(self, session_id: str, command: str, args: list[str] | None = None,
                              env: Any = None, cwd: str | None = None,
                              output_byte_limit: int | None = None, **kwargs: Any) -> Any:
        process = await asyncio.create_subprocess_exec(
            command, *(args or []), cwd=cwd, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT)
        terminal_id = f"term-{len(self.terminals) + 1}"
        self.terminals[terminal_id] = {"process": process, "command": [command, *(args or [])],
                                       "cwd": cwd, "released": False}
        return schema.CreateTerminalResponse(terminal_id=terminal_id)

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str,
                                     **kwargs: Any) -> Any:
        terminal = self.terminals[terminal_id]
        terminal["output"] = (await terminal["process"].stdout.read()).decode()
        return schema.WaitForTerminalExitResponse(exit_code=await terminal["process"].wait())

    async def terminal_output(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        terminal = self.terminals[terminal_id]
        code = terminal["process"].returncode
        status = None if code is None else schema.TerminalExitStatus(exit_code=code)
        return schema.TerminalOutputResponse(output=terminal.get("output", ""), truncated=False,
                                             exit_status=status)

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        self.terminals[terminal_id]["process"].kill()
        return schema.KillTerminalResponse()

    async def release_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        self.terminals[terminal_id]["released"] = True
        return schema.ReleaseTerminalResponse()


@contextlib.asynccontextmanager
async def mol_acp(editor: Editor, hcp: Path, engine: Any, log: Path) -> AsyncIterator[Any]:
    """``mol acp`` on ``hcp`` as a subprocess, connected to ``editor``; its stderr goes to
    ``log``. Leaving closes its stdin: it must then exit, with status 0, by itself."""
    with log.open("ab") as stderr:
        async with acp.spawn_agent_process(
                editor, sys.executable, "-m", "mol.cli", "acp", "--hcp", str(hcp),
                "--engine-url", engine.base_url, observers=[editor.seen],
                transport_kwargs={"stderr": stderr.fileno(), "shutdown_timeout": 30.0},
        ) as (connection, process):
            yield connection
    assert process.returncode == 0, (await anyio.Path(log).read_text())[-3000:]


def npm_prefix(package: str) -> Path:
    """Where ./test caches the npm ``package`` (``name@version``, tests/services.py pins it)."""
    return npm_package(package).prefix()


async def initialized(connection: Any, **capabilities: Any) -> Any:
    """``initialize`` with the editor's capabilities."""
    return await connection.initialize(
        protocol_version=acp.PROTOCOL_VERSION,
        client_capabilities=schema.ClientCapabilities(**capabilities),
        client_info=schema.Implementation(name="test-editor", version="1"))
