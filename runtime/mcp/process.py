"""The process of a stdio MCP server: spawn, line I/O, and a shutdown with no survivors.

mol spawns stdio servers itself rather than through the SDK's ``stdio_client``
so that it knows the process: its pid for status and tests, its exit (a dead
server fails its in-flight calls at once, even when a grandchild still holds
the stdout pipe open), and its stderr (kept as a short tail for error
messages). The server runs in a new session, hence its own process group, so
shutdown can reach every descendant: close stdin, wait, SIGTERM the group,
wait, SIGKILL the group. Nothing here imports ``mcp``.
"""

from __future__ import annotations

import collections
import logging
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import anyio
import anyio.abc

logger = logging.getLogger("mol.mcp")

STDIN_GRACE_SEC = 1.0
"""How long a server may take to exit after its stdin closes."""
TERM_GRACE_SEC = 1.0
"""How long the process group may take to exit after SIGTERM, before SIGKILL."""
MAX_LINE_BYTES = 16 * 1024 * 1024
"""Longest stdout line accepted; a longer one is a protocol error."""
_POLL_SEC = 0.05

INHERITED_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR")
"""Variables of mol's environment every stdio server gets (others only through ``env_vars``)."""


class LineTooLong(Exception):
    """The server wrote a stdout line longer than ``MAX_LINE_BYTES``."""


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
        self._tg: anyio.abc.TaskGroup | None = None

    @property
    def pid(self) -> int | None:
        """The server's pid (also its process group id)."""
        return self.process.pid if self.process else None

    @property
    def returncode(self) -> int | None:
        """The exit status once the server exited, else None."""
        return self.process.returncode if self.process else None

    async def __aenter__(self) -> ServerProcess:
        self.process = await anyio.open_process(
            self.command, env=self.env, cwd=self.cwd, start_new_session=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            self._tg = anyio.create_task_group()
            await self._tg.__aenter__()
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.shutdown()
            raise
        self._tg.start_soon(self._read_stderr)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._tg is not None
        with anyio.CancelScope(shield=True):
            await self.shutdown()
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(None, None, None)

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
                buffer = buffer[-MAX_LINE_BYTES:]
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass

    async def lines(self) -> AsyncIterator[bytes]:
        """The server's stdout, line by line, until EOF; raises ``LineTooLong``."""
        assert self.process and self.process.stdout
        buffer = b""
        async for chunk in self.process.stdout:
            *lines, buffer = (buffer + chunk).split(b"\n")
            for line in lines:
                yield line
            if len(buffer) > MAX_LINE_BYTES:
                raise LineTooLong(f"a stdout line longer than {MAX_LINE_BYTES} bytes")

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
        """Close stdin, wait, SIGTERM the group, wait, SIGKILL the group (no survivors)."""
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
        pgid = process.pid
        # Even after a clean exit of the leader, descendants may linger in its group.
        if _signal_group(pgid, signal.SIGTERM):
            with anyio.move_on_after(TERM_GRACE_SEC):
                while _group_alive(pgid):  # noqa: ASYNC110 (a process group has no exit event)
                    await anyio.sleep(0.02)
            _signal_group(pgid, signal.SIGKILL)
        with anyio.move_on_after(2.0):
            await self.wait_exit()
        if self.returncode is None:
            logger.warning("MCP server %s (pid %d) survived SIGKILL", self.label, pgid)
        await process.aclose()
        # Reap what is left of the group (grandchildren are re-parented to init,
        # but give the kill a moment to land before the caller counts survivors).
        with anyio.move_on_after(1.0):
            while _group_alive(pgid):
                _signal_group(pgid, signal.SIGKILL)
                await anyio.sleep(0.02)


def _signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to process group ``pgid``; False when the group is gone."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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


def _group_alive(pgid: int) -> bool:
    return bool(group_members(pgid))
