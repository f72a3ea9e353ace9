"""``mol serve`` as a real process (for SIGKILL and replicas), and waiting helpers."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import openai

from .conftest import KEY, STARTED, free_port, write_hcp


class Server:
    """One ``mol serve`` process, its log appended to ``log``. ``env``: extra environment
    (say ``MOL_SESSION_STORE``); ``args``: more options of ``mol serve``; ``host``: run it under that host name in a UTS namespace of
    its own, so other processes here see its leases as a remote replica's."""

    def __init__(self, tmp: Path, engine_url: str, log: Path, *, env: dict[str, str] | None = None,
                 host: str | None = None, hcp: Path | None = None,
                 args: tuple[str, ...] = ()) -> None:
        self.port = free_port()
        key_file = tmp / "key"
        key_file.write_text(KEY + "\n")
        environ = {**os.environ, "MOL_API_KEY_FILE": str(key_file), **(env or {})}
        environ.pop("MOL_ALLOW_UNAUTHENTICATED", None)
        # This interpreter's mol (the code under test), not whichever `mol` PATH finds.
        command = [sys.executable, "-m", "mol.cli", "serve", "--hcp", str(hcp or write_hcp(tmp)),
                   "--port", str(self.port), "--engine-url", engine_url, "--drain", "10",
                   *args]
        if host is not None:  # unshare execs (no fork): the pid stays the server's
            command = ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', host,
                       *command]
        with log.open("ab") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                         env=environ)
        STARTED.append(self.proc)
        self.url = f"http://127.0.0.1:{self.port}/v1"
        until(self._healthy, 60)
        self.client = openai.OpenAI(base_url=self.url, api_key=KEY, max_retries=0, timeout=60)

    def _healthy(self) -> bool:
        assert self.proc.poll() is None, "mol serve exited"
        try:
            return httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def kill(self) -> None:
        self.client.close()
        self.proc.kill()
        self.proc.wait(timeout=10)


def until(condition: Callable[[], Any], timeout: float) -> None:
    """Wait for ``condition()`` (polling), failing after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {condition}"
        time.sleep(0.05)


def in_background(call: Callable[[], Any]) -> threading.Thread:
    """Run a request whose server will die under it (its error is expected)."""
    def swallow() -> None:
        with contextlib.suppress(openai.APIError):
            call()

    thread = threading.Thread(target=swallow)
    thread.start()
    return thread


def engine_saw(engine: Any, needle: str, constrained: bool | None = None) -> bool:
    """Whether the scripted engine got an L0 request whose last message holds ``needle``."""
    for record in engine.requests_for("L0"):
        body = record["body"]
        if constrained is not None and ("structured_outputs" in body) != constrained:
            continue
        if needle in body["messages"][-1]["content"]:
            return True
    return False
