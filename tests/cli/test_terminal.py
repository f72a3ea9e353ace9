"""`mol run` and `mol chat` at a terminal: what model text and tool calls can do to it.

The commands run as a user runs them, on a pseudo-terminal (so they see a TTY), against
the scripted engine over HTTP.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest

from mol.runtime.testing import ScriptedEngine
from mol.sandboxes import docker, owner

from .conftest import hcp_text

ESCAPES = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;owned\x07\x1b[2J\x9b31m"
"""A clipboard write (OSC 52), a window title (OSC 0), clear screen, and a C1 CSI."""

HCP = hcp_text("""\
[engine]
api_base = "http://127.0.0.1:9/v1"
routing_constraint = "structured_outputs"
timeout_sec = 30
max_retries = 0
[adapters.L2]
prompt = "You code."
tools.ask = ["terminal"]
""")

PADDED = "ls" + " " * 300 + "; echo PWNED"


def script(reply: str, *calls: str) -> str:
    tool_calls = "".join(f"""
[[L2]]
tool_calls = [{{ name = "terminal", arguments = {{ command = {json.dumps(call)} }} }}]
""" for call in calls)
    return f"""
[[L0]]
constrained = true
times = -1
reply = "L2"
{tool_calls}
[[L2]]
times = -1
reply = {json.dumps(reply)}
[[L0]]
constrained = false
times = -1
reply = "summary"
"""


class Terminal:
    """A process on a pseudo-terminal: what it printed there, and keys to type."""

    def __init__(self, argv: list[str], env: dict[str, str], stderr: int | None = None) -> None:
        self.master, slave = os.openpty()
        self.process = subprocess.Popen(argv, stdin=slave, stdout=slave,
                                        stderr=slave if stderr is None else stderr,
                                        env={**os.environ, **env}, start_new_session=True)
        os.close(slave)
        self.seen = b""

    def read_until(self, text: bytes, timeout: float = 60) -> bytes:
        deadline = time.monotonic() + timeout
        while text not in self.seen:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.master], [], [], left)[0]:
                raise AssertionError(f"never saw {text!r} in {self.seen!r}")
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # the process ended and closed the terminal
                chunk = b""
            if not chunk:
                raise AssertionError(f"ended before {text!r}: {self.seen!r}")
            self.seen += chunk
        return self.seen

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def close(self) -> int:
        """Read what it prints until it ends; its exit code."""
        try:
            while select.select([self.master], [], [], 60)[0]:
                chunk = os.read(self.master, 65536)
                if not chunk:
                    break
                self.seen += chunk
        except OSError:  # EIO: the process ended and closed the terminal
            pass
        try:
            return self.process.wait(timeout=60)
        finally:
            os.close(self.master)


def write_hcp(tmp_path: Path) -> str:
    path = tmp_path / "term.toml"
    path.write_text(HCP)
    return str(path)


def test_model_text_cannot_drive_the_terminal_unless_raw(tmp_path):
    hcp = write_hcp(tmp_path)
    with ScriptedEngine.serve(script(f"look{ESCAPES}here")) as engine:
        env = {"MOL_ENGINE_URL": engine.base_url}
        escaped = Terminal(["mol", "run", "--hcp", hcp, "hi"], env, stderr=subprocess.DEVNULL)
        assert escaped.close() == 0
        raw = Terminal(["mol", "run", "--raw", "--hcp", hcp, "hi"], env,
                       stderr=subprocess.DEVNULL)
        assert raw.close() == 0
    shown = escaped.seen
    assert b"look" in shown and b"here" in shown
    assert b"\x1b" not in shown and b"\x07" not in shown and "\x9b".encode() not in shown
    assert b"\\x1b]52;c;" in shown and b"\\x1b[2J" in shown and b"\\x9b31m" in shown
    assert ESCAPES.encode() in raw.seen


def test_the_approval_prompt_shows_the_whole_call_escaped(tmp_path):
    hcp = write_hcp(tmp_path)
    call = PADDED + "\x1b[8m hidden"
    with ScriptedEngine.serve(script("refused, fine", call)) as engine:
        chat = Terminal(["mol", "chat", "--hcp", hcp], {"MOL_ENGINE_URL": engine.base_url})
        try:
            chat.read_until(b"you> ")
            chat.type("list the files\n")
            prompt = chat.read_until(b"[y/a/N/v] ").decode("utf-8", "replace")
            chat.type("n\n")
            chat.read_until(b"refused, fine")
            chat.type("\x04")
        finally:
            code = chat.close()
    asked = prompt[prompt.index("allow L2"):]
    assert "echo PWNED" in asked and "\x1b" not in asked, asked
    assert "\\u001b[8m hidden" in asked
    assert code == 0


def owned_by(pid: int) -> list[str]:
    found = docker.client().api.containers(all=True, filters={"label": owner.LABEL})
    return [c["Id"] for c in found
            if (o := owner.Owner.parse(c["Labels"].get(owner.OWNER, ""))) and o.pid == pid]


@pytest.mark.docker
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_chat_ended_by_a_signal_removes_its_sandbox(tmp_path, sig):
    hcp = tmp_path / "auto.toml"
    hcp.write_text(HCP.replace('tools.ask = ["terminal"]', 'tools.allow = ["terminal"]'))
    with ScriptedEngine.serve(script("ran it", "echo started")) as engine, subprocess.Popen(
            ["mol", "chat", "--hcp", str(hcp)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env={**os.environ, "MOL_ENGINE_URL": engine.base_url},
    ) as chat:
        try:
            assert chat.stdin is not None and chat.stdout is not None
            chat.stdin.write(b"run something\n")
            chat.stdin.flush()
            assert chat.stdout.readline() == b"ran it\n"
            assert len(owned_by(chat.pid)) == 1  # its sandbox, waiting for the next turn
            chat.send_signal(sig)
            code = chat.wait(timeout=60)
        finally:
            chat.kill()
            errors = chat.communicate()[1]
    assert code == 128 + sig, errors
    assert owned_by(chat.pid) == []
