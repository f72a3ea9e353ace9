"""The conformance suite's client under test through ``mol chat``, with a person at a terminal.

    python chat.py SERVER_URL      (MCP_CONFORMANCE_SCENARIO names the scenario)

Where ``driver.py`` drives ``MCPManager`` and answers from code, this runs what a user
runs: the driver's artifact (the mock server as ``conformance``, its tools allowed to L1),
a scripted engine whose L1 calls the scenario's tool, and ``mol chat`` on a
pseudo-terminal. The person presses Enter at every question of a form (so the schema's
defaults answer), and for a URL-mode request opens the URL (a headless browser that
follows the authorization server's redirects to mol's loopback callback) and says it is
done. An auth scenario starts with ``mol mcp login --no-browser``, whose URL the same
browser opens. Exits 0 once ``mol chat`` printed the turn's answer and ended on Ctrl-D,
1 otherwise, with the screen on stderr.
"""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from driver import CALLS, SCENARIO, artifact_text

from mol.runtime.testing import ScriptedEngine

ANSWER = "the scenario's tool answered"
QUIET = 0.5
"""Seconds without output after which the screen shows a whole prompt."""
URL = re.compile(r"open this URL: (\S+)")
LOGIN_URL = re.compile(r"^\s+(http\S+)$", re.M)


def browse(url: str) -> None:
    """A headless browser: follow the authorization server's redirects to mol's callback."""
    httpx.get(url, follow_redirects=True, timeout=30)


def mol(*args: str) -> list[str]:
    return [sys.executable, "-m", "mol.cli", *args]


def login(hcp: Path, env: dict[str, str]) -> None:
    """``mol mcp login``: the printed URL opened by the browser."""
    process = subprocess.Popen(mol("mcp", "login", "--no-browser", "--hcp", str(hcp),
                                   "conformance"), stderr=subprocess.PIPE, text=True, env=env)
    seen = ""
    assert process.stderr is not None
    for line in process.stderr:
        seen += line
        found = LOGIN_URL.search(line)
        if found:
            browse(found.group(1))
            break
    rest = process.communicate(timeout=120)[1]
    if process.returncode != 0:
        raise SystemExit(f"mol mcp login failed:\n{seen}{rest}")


def tool_of(hcp: Path, env: dict[str, str]) -> str:
    """The qualified name of the tool the scenario calls (an auth scenario: the first)."""
    if SCENARIO in CALLS:
        return f"mcp__conformance__{CALLS[SCENARIO][0][0]}"
    listed = subprocess.run(mol("mcp", "list", "--hcp", str(hcp)), capture_output=True,
                            text=True, env=env, timeout=120).stdout
    return sorted(re.findall(r"mcp__conformance__[\w-]+", listed))[0]


def script(tool: str) -> str:
    return f"""
[[L0]]
constrained = true
reply = "L1"
[[L1]]
tool_calls = [{{ name = "{tool}", arguments = {{}} }}]
[[L1]]
reply = "{ANSWER}"
[[L0]]
constrained = false
times = -1
reply = "summary"
"""


def converse(command: list[str], env: dict[str, str], within: float = 180) -> str:
    """Run ``mol chat`` on a pty and play the person, answering each prompt once the screen
    is quiet (a prompt is whole then); the screen."""
    fd, child = os.openpty()
    process = subprocess.Popen(command, stdin=child, stdout=child, stderr=child, env=env,
                               close_fds=True)
    os.close(child)
    screen, said, asked, ended = "", 0, False, False
    deadline = time.monotonic() + within
    try:
        while process.poll() is None and time.monotonic() < deadline:
            if select.select([fd], [], [], QUIET)[0]:
                try:
                    screen += os.read(fd, 65536).decode(errors="replace")
                except OSError:
                    break
                continue
            new = screen[said:]
            if ANSWER in screen and not ended:
                ended = True
                os.write(fd, b"\x04")  # Ctrl-D: end the chat
            elif new.endswith("you> ") and not asked:
                asked = True
                os.write(fd, b"call the tool\r")
            elif new.endswith("[y/N] ") and URL.search(new):
                browse(URL.search(new).group(1))
                os.write(fd, b"y\r")
            elif new.endswith(("[Y/n] ", ": ")) and asked:
                os.write(fd, b"\r")  # yes, and every field as the schema's default
            else:
                continue
            said = len(screen)
        process.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(fd)
    return screen


def main(url: str) -> int:
    with tempfile.TemporaryDirectory() as state:
        env = {**os.environ, "MOL_STATE_DIR": state, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        hcp = Path(state) / "mol.toml"
        hcp.write_text(artifact_text(url).replace(
            'mcp_servers = ["conformance"]',
            'mcp_servers = ["conformance"]\ntools.allow = ["mcp__conformance__*"]'))
        if SCENARIO.startswith("auth/"):
            login(hcp, env)
        with ScriptedEngine.serve(script(tool_of(hcp, env))) as engine:
            screen = converse(mol("chat", "--hcp", str(hcp), "--engine-url", engine.base_url),
                              env)
    print(screen, file=sys.stderr)
    return 0 if ANSWER in screen and "internal error" not in screen else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
