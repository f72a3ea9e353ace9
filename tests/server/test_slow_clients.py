"""Slow clients under load, against a real ``mol serve`` (uvloop, httptools): 100
connections trickling their heads and 20 trickling their bodies while real turns run.
Each is cut off at its deadline (not before it, and not long after), and the turns
meanwhile are all served."""

from __future__ import annotations

import selectors
import socket
import threading
import time
from contextlib import ExitStack

from mol.runtime.testing import ScriptedEngine

from .conftest import KEY
from .processes import Server

SCRIPT = """
[[L0]]
constrained = true
times = -1
reply = "L1"
[[L1]]
times = -1
reply = "A real answer while slow clients wait."
[[L0]]
times = -1
reply = "summary"
"""

HEAD, BODY = 2.0, 2.0
"""``--header-timeout`` and ``--body-timeout`` of the server under test (seconds)."""
LATE = 1.5
"""How long after its deadline a connection may still be open, on a loaded 2-core machine."""


class Trickle:
    """Connections that each send a byte every half second and note when they were closed
    (and what they were answered)."""

    def __init__(self) -> None:
        self.selector = selectors.DefaultSelector()
        self.started: dict[socket.socket, float] = {}
        self.closed: dict[socket.socket, float] = {}
        self.answers: dict[socket.socket, bytes] = {}

    def add(self, sock: socket.socket, first: bytes) -> None:
        sock.sendall(first)
        sock.setblocking(False)
        self.started[sock] = time.monotonic()
        self.answers[sock] = b""
        self.selector.register(sock, selectors.EVENT_READ)

    def run(self, byte: dict[socket.socket, bytes], until: float) -> None:
        last = time.monotonic()
        while len(self.closed) < len(self.started) and time.monotonic() < until:
            for key, _ in self.selector.select(timeout=0.05):
                sock = key.fileobj
                try:
                    chunk = sock.recv(65536)
                except (BlockingIOError, InterruptedError):
                    continue
                except ConnectionError:
                    chunk = b""
                if chunk:
                    self.answers[sock] += chunk
                else:
                    self.closed[sock] = time.monotonic()
                    self.selector.unregister(sock)
            if time.monotonic() - last >= 0.5:  # a byte now and then buys no time
                last = time.monotonic()
                for sock in set(self.started) - set(self.closed):
                    try:
                        sock.send(byte[sock])
                    except OSError:
                        pass


def test_slow_heads_and_bodies_are_cut_at_their_deadlines_while_turns_run(tmp_path):
    with ScriptedEngine.serve(SCRIPT, latency=0.05) as engine, ExitStack() as stack:
        server = Server(tmp_path, engine.base_url, tmp_path / "serve.log",
                        args=("--header-timeout", str(HEAD), "--body-timeout", str(BODY)))
        stack.callback(server.kill)
        target = ("127.0.0.1", server.port)
        answered: list[str] = []

        def turns() -> None:
            for n in range(12):
                reply = server.client.chat.completions.create(
                    model="mol", messages=[{"role": "user", "content": f"turn {n}"}])
                answered.append(reply.choices[0].message.content)

        trickle, byte = Trickle(), {}
        heads = []
        for _ in range(100):
            sock = stack.enter_context(socket.create_connection(target))
            trickle.add(sock, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            heads.append(sock)
            byte[sock] = b"a"
        bodies = []
        for _ in range(20):
            sock = stack.enter_context(socket.create_connection(target))
            trickle.add(sock, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                        b"Content-Type: application/json\r\nContent-Length: 100000\r\n"
                        b"Authorization: Bearer " + KEY.encode() + b"\r\n\r\n{\"mo")
            bodies.append(sock)
            byte[sock] = b" "
        worker = threading.Thread(target=turns)
        worker.start()
        trickle.run(byte, until=time.monotonic() + max(HEAD, BODY) + 10)
        worker.join(timeout=60)
    assert answered == ["A real answer while slow clients wait."] * 12
    for group, deadline in ((heads, HEAD), (bodies, BODY)):
        for sock in group:
            assert sock in trickle.closed, "still open"
            waited = trickle.closed[sock] - trickle.started[sock]
            assert deadline - 0.05 <= waited <= deadline + LATE, waited
    for sock in bodies:
        assert trickle.answers[sock].startswith(b"HTTP/1.1 408"), trickle.answers[sock][:200]
