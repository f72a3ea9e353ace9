"""What the benchmarks that run servers as processes share: a free loopback port, and
starting a process that is ready once its ``/health`` answers 200.

The benchmarks run as scripts (``python bench/NAME.py``), so this folder is first on
``sys.path`` and they import it as ``procs``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time


def free_port() -> int:
    """A TCP port free on loopback now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_healthy(command: list[str], port: int, name: str, env: dict[str, str] | None = None,
                  timeout: float = 90.0) -> subprocess.Popen:
    """Start ``command`` (output discarded) and wait until ``http://127.0.0.1:PORT/health``
    answers 200; killed and ``RuntimeError`` naming ``name`` when it exits or the wait runs
    out."""
    import httpx

    proc = subprocess.Popen(command, env={**os.environ, **(env or {})},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            proc.wait()
            raise RuntimeError(f"{name} did not start")
        time.sleep(0.05)
