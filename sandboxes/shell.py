"""The persistent shell protocol: commands in, output and end markers out.

A sandbox runs three kinds of process (``mol.sandboxes.scripts`` has their programs):
the *control shell* (the container's main process, reached through the attach socket),
the *command shell* (one ``docker exec``, kept open) and, per command, the *command*
itself: a bash of the sandbox user that the command shell forks, restoring the shell
state (working directory, variables, functions, options, ``$?``) the previous command
left. ``Shell.run`` sends a command up to a NUL byte and reads its output up to the end
marker ``__mol_<token>_<status>``, which only the command shell prints, after the
command's process ended: the command, another user, can neither read the token nor make
its end come early.

Timeouts are enforced from outside by the control shell, root with only ``CAP_KILL`` and
running builtins at a higher priority than any command, so it answers even while a fork
bomb holds every pid and every cycle the sandbox may use. On a timeout it stops, then
kills, every process started since the command began, sparing only init, the two shells
(recorded by pid and start time) and the command's own shell; process groups, ``setsid``
and environment variables hide nothing from it. The command's shell then gets ``GRACE``
seconds to report (keeping the state it had), else it is killed too. Whatever a command
does, its result comes within its timeout plus ``MAX_GRACE``; if the sandbox no longer
answers by then, the ``Sandbox`` kills its container from outside and replaces it.

After timeouts, slow commands, and at most once a second otherwise, the control shell
also counts processes: a fork bomb left running in the background (near
``pids_limit``) is swept away whole.
"""

from __future__ import annotations

import secrets
import time
from collections import deque
from collections.abc import Callable

import anyio

from mol.core.errors import ShellDied
from mol.sandboxes.control import COMMAND, CONTROL_DEADLINE, EVERY, Control
from mol.sandboxes.output import OutputCap
from mol.sandboxes.result import CommandResult
from mol.sandboxes.stream import STDOUT, MarkerScanner, MuxSocket

STOP_DEADLINE = 2.0
"""Seconds the control shell may take to answer while a timed-out command is stopped."""

SLOW = 0.25
"""Seconds after which a command's end also checks the sandbox's process count."""

BOMB_SHARE = 0.75
"""Share of ``pids_limit`` in processes (not threads) at which every process but the shells
is killed: a fork bomb pinned at the limit, most likely."""

CHECK_EVERY = 1.0
"""Seconds between process-count checks after quick commands."""

GRACE = 3.0
"""Seconds a command's shell gets to report after the processes it started were killed."""

REPORT = 1.0
"""Seconds the command shell gets to report once the command's shell was killed too."""

SWEEPS = 3
"""Sweeps at most in a row: each stops what it finds, so what forked during one is found by
the next (on a busy machine a bomb outruns a single pass)."""

KILL_DEADLINE = 5.0
"""Seconds the Docker engine gets to kill a sandbox that stopped answering."""

MAX_GRACE = (3 * SWEEPS + 3) * STOP_DEADLINE + GRACE + REPORT + KILL_DEADLINE
"""The most a command's result may come after its timeout, whatever the command does: the
control shell's answers (sweeps of what the command started, a process count and bomb
sweeps, killing the command's shell, then the command shell, sweeps of what forked
meanwhile), the grace, the last report and, if the sandbox no longer answers, killing its
container from outside. Usually it is well under a second."""


class Shell:
    """One command shell; not safe for concurrent commands (the sandbox locks)."""

    def __init__(self, sock: MuxSocket, token: str, control: Control, *,
                 pids_limit: int = 0) -> None:
        self._sock = sock
        self.token = token
        """The marker token (a secret: sent on the shell's stdin, never shown)."""
        self._scanner = MarkerScanner(f"__mol_{token}_".encode())
        self._control = control
        self._pids_limit = pids_limit
        self._checked = time.monotonic()
        self._bomb_kills = 0
        self._stderr: deque[bytes] = deque(maxlen=16)
        self.pid = self.start = 0
        self.alive = True

    @staticmethod
    def new_token() -> str:
        """A marker token nobody can guess."""
        return secrets.token_hex(16)

    async def handshake(self, timeout: float = 30.0) -> int:  # noqa: ASYNC109 (kills in-sandbox processes)
        """Hand the shell its token and check it answers; returns its pid."""
        try:
            with anyio.fail_after(timeout):
                await self._sock.send(self.token.encode() + b"\0")
                word = await self._next_marker()
        except (TimeoutError, anyio.EndOfStream, anyio.BrokenResourceError) as exc:
            self.close()
            raise ShellDied(f"the sandbox shell did not start: {self.diagnostics() or exc}") \
                from None
        self.pid = int(word)
        self.start = await self._control.started(self.pid)
        await self._reap()
        return self.pid

    def diagnostics(self) -> str:
        """The last things the shell wrote on its own stderr."""
        return b"".join(self._stderr).decode("utf-8", "replace").strip()

    async def run(self, command: str, *, timeout: float, limit: int,  # noqa: ASYNC109 (kills in-sandbox processes)
                  on_output: Callable[[bytes], None] | None = None,
                  clean: bool = False) -> CommandResult:
        """Run ``command`` (``clean``: without the shell state); output beyond ``limit``
        bytes keeps head and tail. A sandbox that stops answering (``ShellDied``) ends the
        result with ``shell_exited``; the caller replaces the sandbox."""
        if not self.alive:
            raise ShellDied("the shell has exited")
        cap = OutputCap(limit)

        def sink(data: bytes) -> None:
            cap.feed(data)
            if on_output:
                on_output(data)

        self._scanner.sink = sink
        started = time.monotonic()
        word: str | None = None
        timed_out = lost = False
        try:
            line = (b"c" if clean else b"s") + command.encode("utf-8", "surrogateescape")
            await self._sock.send(line + b"\0")
            with anyio.move_on_after(timeout):
                word = await self._next_marker()
            if word is None:
                timed_out = True
                word, lost = await self._stop()
        except (anyio.EndOfStream, anyio.BrokenResourceError, ShellDied):
            word = None
        except BaseException:
            # Cancelled (or the output callback failed) mid-command: this shell's stream is
            # no longer in step with its commands, so end the command and the shell.
            with anyio.CancelScope(shield=True), anyio.move_on_after(MAX_GRACE):
                await self._abandon()
            raise
        if word is None:
            self.close()
        duration = time.monotonic() - started
        reaped, self._bomb_kills = self._bomb_kills, 0
        if self.alive and not timed_out and self._check_due(duration):
            try:
                reaped = await self._reap()
            except ShellDied:
                self.close()
        return CommandResult(
            output=cap.text(), exit_code=_status(word), timed_out=timed_out, timeout=timeout,
            total_bytes=cap.total, dropped_bytes=cap.dropped,
            shell_exited=not self._control.alive, state_lost=lost,
            process_limit_kills=reaped, duration=duration)

    def _check_due(self, duration: float) -> bool:
        """Whether to count the sandbox's processes now: after a slow command (it may have
        met a fork bomb left running by an earlier one), else at most once per
        ``CHECK_EVERY`` seconds, so quick commands keep their short round trip."""
        now = time.monotonic()
        if duration > SLOW or now - self._checked > CHECK_EVERY:
            self._checked = now
            return True
        return False

    async def _reap(self, deadline: float = CONTROL_DEADLINE) -> int:
        """Near the process limit (a fork bomb, most likely), kill every other process."""
        limit = self._pids_limit
        if not limit or await self._control.count(deadline) < BOMB_SHARE * limit:
            return 0
        # (The command shell's child is the next command's shell, waiting: it is spared.)
        return max(1, (await self._sweep_quiet(EVERY, deadline))[0])

    async def _sweep_quiet(self, since: str, deadline: float) -> tuple[int, str]:
        """Sweep (at most ``SWEEPS`` times) until one finds nothing: (killed, boundary)."""
        killed = 0
        for _ in range(SWEEPS):
            found, since = await self._control.sweep(since, self._recorded(), keep=self.pid,
                                                     deadline=deadline)
            killed += found
            if not found:
                break
        return killed, since

    def _recorded(self) -> list[tuple[int, int]]:
        return [(self.pid, self.start)] if self.pid else []

    async def _next_marker(self) -> str:
        while True:
            for stream, payload in await self._sock.receive():
                if stream != STDOUT:
                    self._stderr.append(payload[-512:])
                    continue
                word = self._scanner.feed(payload)
                if word is not None:
                    return word

    async def _stop(self) -> tuple[str | None, bool]:
        """After a timeout: kill what the command started, then let its shell report (else
        kill that too). Returns the marker's word and whether the shell state was lost."""
        # Count for a bomb (an earlier command's may be what held this one up) before the
        # sweep of the command's own processes, which could hide it below the limit.
        self._bomb_kills = await self._reap(STOP_DEADLINE)
        _, since = await self._sweep_quiet(COMMAND, STOP_DEADLINE)
        word, lost = await self._report(since)
        if self._control.alive:  # what its shell forked until it ended, from the same start
            await self._sweep_quiet(since, STOP_DEADLINE)
        return word, lost

    async def _report(self, boundary: str) -> tuple[str | None, bool]:
        """The stopped command's marker and whether its shell's state was lost (a loop of
        builtins runs in the command's shell itself: only killing that stops it)."""
        with anyio.move_on_after(GRACE):
            return await self._next_marker(), False
        await self._control.kill_shell(boundary, STOP_DEADLINE)
        with anyio.move_on_after(REPORT):
            return await self._next_marker(), True
        await self._control.kill(self.pid, deadline=STOP_DEADLINE)
        return None, True

    async def _abandon(self) -> None:
        try:
            _, boundary = await self._control.sweep(COMMAND, self._recorded(), keep=self.pid,
                                                    deadline=STOP_DEADLINE)
            await self._control.kill_shell(boundary, STOP_DEADLINE)
        except ShellDied:
            pass  # the control shell is gone too; the error being raised says more
        finally:
            self.close()

    def close(self) -> None:
        """Forget this shell (its process, if alive, ends when its input closes)."""
        self.alive = False
        self._sock.close()


def _status(word: str | None) -> int | None:
    """The exit status in a marker word: ``0``, ``127``."""
    digits = (word or "").strip()
    return int(digits) if digits.isdigit() else None
