"""Elicitation through ``mol chat`` in a real pseudo-terminal: the person answers the server's
form at the prompt, empty answers take the schema's defaults, and the model reads the result."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time

import anyio
import pytest

from mol.runtime.testing import ScriptedEngine

from .conftest import artifact_text, stdio_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SCRIPT = """
[[L0]]
constrained = true
reply = "L1"
[[L1]]
tool_calls = [{ name = "mcp__s__ask_user", arguments = {} }]
[[L1]]
when = "accept: {'name': 'Ada', 'color': 'blue'}"
reply = "Hello Ada, blue it is."
[[L0]]
constrained = false
times = -1
reply = "L1 greeted."
"""


class Terminal:
    """A program on a pty: ``expect`` text on its screen, ``send`` keys."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.fd, child = os.openpty()
        self.proc = subprocess.Popen(command, stdin=child, stdout=child, stderr=child, env=env,
                                     close_fds=True)
        os.close(child)
        self.screen = ""

    def expect(self, text: str, within: float = 60) -> None:
        deadline = time.monotonic() + within
        while text not in self.screen:
            left = deadline - time.monotonic()
            assert left > 0, f"{text!r} never appeared; the screen:\n{self.screen[-2000:]}"
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.5))
            if ready:
                try:
                    self.screen += os.read(self.fd, 65536).decode(errors="replace")
                except OSError:  # the program ended
                    assert text in self.screen, f"{text!r} never appeared:\n{self.screen[-2000:]}"

    def send(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        os.close(self.fd)


async def test_mol_chat_asks_the_person_and_the_model_reads_the_answer(tmp_path):
    servers = {"s": stdio_server("--legacy")}
    adapters = {"L1": {"mcp_servers": ["s"], "tools.allow": ["mcp__s__ask_user"]}}
    async with ScriptedEngine.serve(SCRIPT) as engine:
        hcp = tmp_path / "mol.toml"
        hcp.write_text(artifact_text(servers, adapters))
        env = {**os.environ, "HOME": str(tmp_path), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        terminal = Terminal([sys.executable, "-m", "mol.cli", "chat", "--hcp", str(hcp),
                             "--engine-url", engine.base_url], env)

        def converse() -> None:
            terminal.expect("you> ")
            terminal.send("greet me\r")
            terminal.expect("MCP server s asks: What is your name?")
            terminal.expect("answer? [Y/n]")
            terminal.send("\r")
            terminal.expect("name")
            terminal.send("Ada\r")
            terminal.expect("[blue]")
            terminal.send("\r")  # empty: the default
            terminal.expect("Hello Ada, blue it is.")

        try:
            await anyio.to_thread.run_sync(converse)
        finally:
            terminal.close()
    [result] = [r for r in engine.requests_for("L1") if "accept:" in str(r["body"]["messages"])]
    assert "accept: {'name': 'Ada', 'color': 'blue'}" in result["body"]["messages"][-1]["content"]
