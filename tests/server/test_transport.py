"""Slow and greedy clients, on raw sockets: bounded connections, header and body deadlines,
idle connections closed, all before any authentication."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from contextlib import ExitStack

import httpx
import pytest

from mol.runtime.testing import ScriptedEngine
from mol.server.http import transport

from .conftest import KEY, free_port, serve_app, write_hcp

SCRIPT = """
[[L0]]
times = -1
reply = "L0"
"""


def address(served) -> tuple[str, int]:
    host, port = served.url.removeprefix("http://").removesuffix("/v1").split(":")
    return host, int(port)


def closed_within(sock: socket.socket, seconds: float) -> tuple[bool, bytes]:
    """Whether the server closes ``sock`` within ``seconds``; what it sent before."""
    sock.settimeout(0.2)
    received, deadline = b"", time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        except ConnectionError:
            return True, received
        if not chunk:
            return True, received
        received += chunk
    return False, received


@pytest.fixture(params=["httptools", "h11"])
def protocol(request, monkeypatch):
    """Each test on both HTTP protocols ``mol serve`` may run: httptools when installed
    (the ``fast`` extra), else h11."""
    if request.param == "h11":
        monkeypatch.setattr(transport, "installed", lambda module: module != "httptools")
    return request.param


def expect_protocol(served, protocol: str) -> None:
    name = served.server.config.http_protocol_class.__name__
    assert name == {"h11": "GuardedH11Protocol", "httptools": "GuardedHttpToolsProtocol"}[
        protocol], name


def test_slow_headers_idle_and_slow_bodies_are_cut_off(tmp_path, protocol):
    with ScriptedEngine.serve(SCRIPT) as engine, serve_app(
            tmp_path, engine.base_url, header_timeout=1.0, body_timeout=1.0) as served, \
            ExitStack() as stack:
        expect_protocol(served, protocol)
        target = address(served)
        slow, idle, bodies = [], [], []
        for _ in range(20):
            sock = stack.enter_context(socket.create_connection(target))
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            slow.append(sock)
            idle.append(stack.enter_context(socket.create_connection(target)))
            sock = stack.enter_context(socket.create_connection(target))
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                         b"Content-Type: application/json\r\nContent-Length: 1000\r\n"
                         b"Authorization: Bearer " + served.key.encode() + b"\r\n\r\n{\"mo")
            bodies.append(sock)
        started = time.monotonic()
        for sock in slow[:5]:  # a byte now and then does not buy more time
            sock.sendall(b"a")
        for sock in slow + idle:
            assert closed_within(sock, 6 - (time.monotonic() - started))[0]
        for sock in bodies:
            closed, answer = closed_within(sock, 6)
            assert closed and answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert time.monotonic() - started < 6
        # Meanwhile and afterwards, an ordinary client is served.
        assert httpx.get(served.url.removesuffix("/v1") + "/health", timeout=10).status_code == 200


def test_connections_beyond_the_limit_are_refused_at_once(tmp_path, protocol):
    with ScriptedEngine.serve(SCRIPT) as engine, serve_app(
            tmp_path, engine.base_url, max_connections=10, header_timeout=30.0) as served, \
            ExitStack() as stack:
        expect_protocol(served, protocol)
        target = address(served)
        held = [stack.enter_context(socket.create_connection(target)) for _ in range(10)]
        time.sleep(0.3)
        started = time.monotonic()
        extra = stack.enter_context(socket.create_connection(target))
        closed, answer = closed_within(extra, 5)
        assert closed and answer.startswith(b"HTTP/1.1 503"), answer
        assert time.monotonic() - started < 2
        for sock in held[:3]:
            sock.close()
        time.sleep(0.3)
        health = httpx.get(served.url.removesuffix("/v1") + "/health", timeout=10)
        assert health.status_code == 200


def test_mol_serve_runs_uvloop_and_httptools_in_its_main_thread(tmp_path):
    """The production server picks the fast loop and parser itself (both installed with the
    ``fast`` extra, which the test extra includes); an in-thread server never gets uvloop."""
    key_file = tmp_path / "key"
    key_file.write_text(KEY)
    key_file.chmod(0o600)
    with ScriptedEngine.serve(SCRIPT) as engine:
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "mol.cli", "serve", "--hcp", str(write_hcp(tmp_path)),
             "--port", str(port), "--engine-url", engine.base_url],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
            env={**os.environ, "MOL_API_KEY_FILE": str(key_file)})
        try:
            assert proc.stderr is not None
            first = proc.stderr.readline()
            assert first.startswith("mol serve: served") and first.rstrip().endswith(
                "uvloop + httptools"), first
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            proc.stderr.close()
