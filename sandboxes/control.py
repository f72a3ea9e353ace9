"""The control shell's client: the container's main process, which stops and kills processes.

The control shell (``scripts.CONTROL_SCRIPT``) is root with only ``CAP_KILL``, reached
through the container's attach socket, and runs only builtins at a higher priority than
any command, so it answers even while a fork bomb holds every pid. ``Control`` sends it
one request per line and reads one marker line back for each: sweeps of what a command
started, killing a timed-out command's shell, a process's start time, a process count.
It is a process and a protocol of its own, apart from the command shell's: ``Shell``
asks it to enforce timeouts and sweep fork bombs, ``Sandbox`` to clear a sandbox whose
pids a fork bomb holds.
"""

from __future__ import annotations

import anyio

from mol.core.errors import ShellDied
from mol.sandboxes.stream import STDOUT, MarkerScanner, MuxSocket

EVERY, COMMAND = "-1", "child"
"""Sweep boundaries: every process, or what the running command started (since its shell,
the command shell's child, did). Later sweeps of one command reuse the boundary the first
returned: once that shell has exited, the command shell's child is the next command's."""

CONTROL_DEADLINE = 30.0
"""Seconds the control shell may take to answer an ordinary request."""


class Control:
    """The container's main bash (root, ``CAP_KILL`` only): stops and kills processes."""

    def __init__(self, sock: MuxSocket, token: str) -> None:
        self._sock = sock
        self.token = token
        """The marker token (a secret: sent on the control shell's stdin, never shown)."""
        self._scanner = MarkerScanner(f"__mol_{token}_".encode())
        self._lock = anyio.Lock()
        self.pid = 0
        self.alive = True

    async def handshake(self) -> int:
        """Hand the control shell its token and check it answers; returns its pid."""
        await self._sock.send(self.token.encode() + b"\n")
        self.pid = int(await self._ask("__mol_say $$"))
        return self.pid

    async def sweep(self, since: str, spare: list[tuple[int, int]], keep: int = -1,
                    deadline: float = CONTROL_DEADLINE) -> tuple[int, str]:
        """Stop, then kill, every process started since ``since`` (``EVERY``, ``COMMAND`` or
        a boundary returned before) but the ``(pid, start)`` in ``spare`` and the children of
        ``keep``; returns how many were killed and the boundary used."""
        recorded = " ".join(f"{pid}:{start}" for pid, start in spare)
        answer = await self._ask(f"__mol_sweep {since} {keep} {recorded}", deadline)
        killed, _, boundary = answer.strip().partition(":")
        return int(killed), boundary

    async def kill_shell(self, boundary: str, deadline: float = CONTROL_DEADLINE) -> int:
        """Kill the command's shell a sweep's boundary names (not a later process that got
        its pid, nor the next command's shell); returns how many (0 or 1)."""
        return int(await self._ask(f"__mol_kill_shell {boundary}", deadline))

    async def started(self, pid: int) -> int:
        """A process's start time in clock ticks since boot (-1: no such process)."""
        return int(await self._ask(f"__mol_started {pid}"))

    async def count(self, deadline: float = CONTROL_DEADLINE) -> int:
        """How many processes the sandbox holds."""
        return int(await self._ask("__mol_count", deadline))

    async def kill(self, pid: int, signal: str = "KILL",
                   deadline: float = CONTROL_DEADLINE) -> None:
        """Send ``signal`` (default SIGKILL) to one process."""
        await self._ask(f"__mol_kill -{signal} {pid}", deadline)

    async def _ask(self, line: str, deadline: float = CONTROL_DEADLINE) -> str:
        if not self.alive:
            raise ShellDied("the sandbox's control shell stopped answering")
        # Shielded: an exchange cut in half would leave its answer to the next question.
        with anyio.CancelScope(shield=True):
            async with self._lock:
                try:
                    with anyio.fail_after(deadline):
                        await self._sock.send(line.encode() + b"\n")
                        return await self._answer()
                except (TimeoutError, anyio.EndOfStream, anyio.BrokenResourceError) as exc:
                    self.close()
                    raise ShellDied("the sandbox's control shell stopped answering; the "
                                    "sandbox must be recreated") from exc

    async def _answer(self) -> str:
        while True:
            for stream, payload in await self._sock.receive():
                if stream == STDOUT:
                    word = self._scanner.feed(payload)
                    if word is not None:
                        return word

    def close(self) -> None:
        """Drop the connection (the control shell keeps running until the container goes)."""
        self.alive = False
        self._sock.close()
