"""The process of a stdio MCP server: spawn, line I/O, and a shutdown with no survivors.

mol spawns stdio servers itself rather than through the SDK's ``stdio_client``
so that it knows the process: its pid for status and tests, its exit (a dead
server fails its in-flight calls at once, even when a grandchild still holds
the stdout pipe open), and its stderr (kept as a short tail for error
messages). The server runs in a new session, hence its own process group, so
shutdown can reach every descendant: close stdin, wait, SIGTERM, wait, SIGKILL,
sent to the group, to every descendant found through ``/proc`` (a ``setsid``
grandchild leaves the group), and to every process carrying the server's
``MOL_MCP_OWNER`` environment marker (which survives re-parenting). The server
gets ``PR_SET_PDEATHSIG`` (through ``setpriv``), so a SIGKILLed mol takes it
down, and ``reap_orphans`` ends what a crashed runtime left, by its marker.

Output is read in O(n): a stdout line longer than ``MAX_MESSAGE_BYTES`` is not
kept, only its head and tail (an ``Oversize``), so one message can neither
fill memory nor cost quadratic copying. Nothing here imports ``mcp``.
"""

from __future__ import annotations

import collections
import logging
import os
import shutil
import signal
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.abc

from mol.core.owner import start_ticks

logger = logging.getLogger("mol.mcp")

STDIN_GRACE_SEC = 1.0
"""How long a server may take to exit after its stdin closes."""
TERM_GRACE_SEC = 1.0
"""How long the process group may take to exit after SIGTERM, before SIGKILL."""
MAX_MESSAGE_BYTES = 8 * 1024 * 1024
"""Longest stdout line (one JSON-RPC message) accepted; a longer one is refused."""
OVERSIZE_KEEP = 4096
"""Bytes kept of each end of an oversize line (to name the request it answered)."""
OWNER_VAR = "MOL_MCP_OWNER"
"""Environment marker of a server process: ``<mol pid>:<mol start time>:<server id>``."""
_POLL_SEC = 0.05
_SETPRIV = shutil.which("setpriv")

INHERITED_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR")
"""Variables of mol's environment every stdio server gets (others only through ``env_vars``)."""


@dataclass
class Oversize:
    """A stdout line longer than ``MAX_MESSAGE_BYTES``: only its ends are kept."""

    head: bytes
    tail: bytes = b""
    size: int = 0


def server_environment(env: Mapping[str, str], env_vars: list[str],
                       env_from: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a server: the safe defaults, ``env_vars`` passed through,
    ``env_from`` (server variable -> mol's variable of another name), then ``env``."""
    result = {k: os.environ[k] for k in INHERITED_ENV if k in os.environ}
    sources = [(name, name, "env_vars") for name in env_vars]
    sources += [(name, source, "env_from") for name, source in (env_from or {}).items()]
    for name, source, field in sources:
        if source in os.environ:
            result[name] = os.environ[source]
        else:
            logger.warning("environment variable %s named in %s is not set", source, field)
    result.update(env)
    return result


class ServerProcess:
    """A spawned stdio server, owned by ``async with``; leaving kills its whole group."""

    def __init__(self, command: list[str], *, env: dict[str, str], cwd: Path | None,
                 label: str) -> None:
        self.command = command
        self.env = env
        self.cwd = cwd
        self.label = label
        self.process: anyio.abc.Process | None = None
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=20)
        self.marker = f"{_self_identity()}:{uuid.uuid4().hex[:12]}"
        self._tg: anyio.abc.TaskGroup | None = None
        self._stack = AsyncExitStack()

    @property
    def pid(self) -> int | None:
        """The server's pid (also its process group id)."""
        return self.process.pid if self.process else None

    @property
    def returncode(self) -> int | None:
        """The exit status once the server exited, else None."""
        return self.process.returncode if self.process else None

    async def __aenter__(self) -> ServerProcess:
        # setpriv execs the command in place (same pid): the server dies with mol.
        command = ([_SETPRIV, "--pdeathsig", "KILL", "--", *self.command] if _SETPRIV
                   else self.command)
        self.process = await anyio.open_process(
            command, env={**self.env, OWNER_VAR: self.marker}, cwd=self.cwd,
            start_new_session=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        async with AsyncExitStack() as stack:
            # Unwinding (a failed start, or __aexit__) shuts the process down first, then
            # ends the stderr reader.
            self._tg = await stack.enter_async_context(anyio.create_task_group())
            stack.push_async_callback(self._stop)
            self._tg.start_soon(self._read_stderr)
            self._stack = stack.pop_all()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    async def _stop(self) -> None:
        with anyio.CancelScope(shield=True):
            await self.shutdown()
        assert self._tg is not None
        self._tg.cancel_scope.cancel()

    async def _read_stderr(self) -> None:
        assert self.process and self.process.stderr
        buffer = b""
        try:
            async for chunk in self.process.stderr:
                *lines, buffer = (buffer + chunk).split(b"\n")
                for line in lines:
                    text = line.decode(errors="replace").rstrip()
                    self.stderr_tail.append(text)
                    logger.debug("[%s stderr] %s", self.label, text)
                buffer = buffer[-OVERSIZE_KEEP:]
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass

    async def lines(self) -> AsyncIterator[bytes | Oversize]:
        """The server's stdout, line by line, until EOF; an overlong line comes as ``Oversize``.

        Each chunk is searched once for newlines, so reading costs O(n) whatever
        the line lengths; at most ``MAX_MESSAGE_BYTES`` are held at a time.
        """
        assert self.process and self.process.stdout
        parts: list[bytes] = []
        size = 0
        oversize: Oversize | None = None
        async for chunk in self.process.stdout:
            start = 0
            while True:
                end = chunk.find(b"\n", start)
                piece = chunk[start:] if end < 0 else chunk[start:end]
                if oversize is not None:
                    oversize.tail = (oversize.tail + piece)[-OVERSIZE_KEEP:]
                    oversize.size += len(piece)
                elif size + len(piece) > MAX_MESSAGE_BYTES:
                    head = b"".join([*parts, piece])
                    oversize = Oversize(head[:OVERSIZE_KEEP], head[-OVERSIZE_KEEP:], len(head))
                    parts, size = [], 0
                else:
                    parts.append(piece)
                    size += len(piece)
                if end < 0:
                    break
                if oversize is not None:
                    yield oversize
                    oversize = None
                else:
                    yield b"".join(parts)
                parts, size = [], 0
                start = end + 1

    async def send(self, data: bytes) -> None:
        """Write ``data`` to the server's stdin."""
        assert self.process and self.process.stdin
        await self.process.stdin.send(data)

    async def wait_exit(self) -> int:
        """Wait until the server process exits; its status.

        Polls instead of ``Process.wait()``, which on asyncio also waits for the
        pipes to close, and a grandchild holding them would hide the exit.
        """
        while self.returncode is None:  # noqa: ASYNC110 (no event fires on a child's exit alone)
            await anyio.sleep(_POLL_SEC)
        return self.returncode

    def describe_exit(self) -> str:
        """Why the process is gone, with the last lines of its stderr."""
        code = self.returncode
        if code is None:
            reason = "closed its stdout"
        elif code < 0:
            reason = f"was killed by signal {signal.Signals(-code).name}"
        else:
            reason = f"exited with status {code}"
        tail = " | ".join(line for line in self.stderr_tail if line)[-500:]
        return f"{reason}; stderr: {tail}" if tail else reason

    async def shutdown(self) -> None:
        """Close stdin, wait, then SIGTERM and SIGKILL everything the server started."""
        process = self.process
        if process is None:
            return
        if process.stdin is not None:
            try:
                await process.stdin.aclose()
            except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass
        with anyio.move_on_after(STDIN_GRACE_SEC):
            await self.wait_exit()
        pid = process.pid
        # Even after a clean exit of the leader, descendants may linger: in its group,
        # or (after setsid) elsewhere, found by their marker or their parent chain.
        left = await anyio.to_thread.run_sync(self._survivors)
        if left:
            _signal_all(pid, left, signal.SIGTERM)
            with anyio.move_on_after(TERM_GRACE_SEC):
                while left:
                    await anyio.sleep(0.02)
                    left = await anyio.to_thread.run_sync(self._survivors)
        with anyio.move_on_after(2.0):
            while left := await anyio.to_thread.run_sync(self._survivors):
                _signal_all(pid, left, signal.SIGKILL)
                await anyio.sleep(0.02)
        if self.returncode is None:
            with anyio.move_on_after(1.0):
                await self.wait_exit()
        if self.returncode is None:
            logger.warning("MCP server %s (pid %d) survived SIGKILL", self.label, pid)
        await process.aclose()

    def _survivors(self) -> list[int]:
        """Live processes of the server: its group, its descendants, its marker."""
        assert self.process is not None
        pid = self.process.pid
        table = processes()
        found = {p for p, state, _, group in table if group == pid and state != "Z"}
        found |= descendants(pid, table)
        found |= set(marked(lambda value: value == self.marker.encode()))
        if self.returncode is None and _alive(pid):
            found.add(pid)
        return sorted(p for p in found if _alive(p))


def _signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to process group ``pgid``; False when the group is gone."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal_all(pgid: int, pids: list[int], sig: int) -> None:
    _signal_group(pgid, sig)
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def _self_identity() -> str:
    return f"{os.getpid()}:{start_ticks(os.getpid())}"


def descendants(pid: int, table: list[tuple[int, str, int, int]]) -> set[int]:
    """Every live descendant of ``pid`` that still hangs off its parent chain."""
    children: dict[int, list[int]] = {}
    for p, state, parent, _ in table:
        if state != "Z":
            children.setdefault(parent, []).append(p)
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def marked(accept: Callable[[bytes], bool]) -> list[int]:
    """Processes whose environment has an ``OWNER_VAR`` value ``accept`` takes."""
    prefix = OWNER_VAR.encode() + b"="
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                environ = f.read()
        except OSError:
            continue
        for entry in environ.split(b"\0"):
            if entry.startswith(prefix) and accept(entry[len(prefix):]):
                found.append(int(name))
                break
    return found


def reap_orphans() -> list[int]:
    """Kill MCP server processes whose runtime is gone (a SIGKILLed mol); their pids.

    A process is an orphan when its marker names a mol process (pid and start
    time) that no longer runs; servers of live runtimes are left alone.
    """
    def orphaned(value: bytes) -> bool:
        owner_pid, _, rest = value.decode(errors="replace").partition(":")
        started = rest.partition(":")[0]
        if not owner_pid.isdigit():
            return True
        ticks = start_ticks(int(owner_pid))
        return ticks is None or str(ticks) != started

    victims = [pid for pid in marked(orphaned) if _alive(pid)]
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return victims


def processes() -> list[tuple[int, str, int, int]]:
    """(pid, state, ppid, process group) of every process, from /proc."""
    table = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                # Fields after the parenthesized command: state, ppid, pgrp, ...
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        table.append((int(name), fields[0].decode(), int(fields[1]), int(fields[2])))
    return table


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of process group ``pgid``."""
    return [pid for pid, state, _, group in processes() if group == pgid and state != "Z"]


