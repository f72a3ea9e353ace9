"""The persistent shell protocol: one bash per sandbox, fed commands, answering with markers.

The command shell is ``bash`` started once through ``docker exec`` with its
stdin, stdout and stderr on one socket. Its script (``SHELL_SCRIPT``) moves
the socket to fd 63 and points stdin at ``/dev/null`` (a command that reads
stdin sees end of input instead of stealing the protocol), then loops: read a
command up to a NUL byte, ``eval`` it in the shell itself (so ``cd``,
``export``, functions and options persist), stderr merged into stdout, and
print ``__mol_<token>_<status>\\n``. An ``EXIT`` trap prints
``__mol_<token>_exit <status>`` when the shell itself ends, so ``exit`` is
noticed at once even when a background job still holds the output open.

Timeouts are enforced from outside by the *control shell*: the container's
main process, a second bash reached through the attach socket that only runs
builtins (so it works even when a fork bomb holds every pid). On a timeout it
kills every process that started since the command began, except the shells
and init; process groups and ``setsid`` do not hide a process from it. The
command shell then prints its marker and lives on; if it does not (the
command was a loop of builtins), the shell is killed and the next command
starts a fresh one.
"""

from __future__ import annotations

import math
import secrets
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import anyio

from mol.runtime.errors import ShellDied
from mol.sandboxes.output import OutputCap
from mol.sandboxes.stream import STDOUT, MarkerScanner, MuxSocket

SHELL_SCRIPT = r"""
exec 63<&0 </dev/null
__mol_mark="__mol_$1_"
trap 'builtin printf "%sexit %d\n" "$__mol_mark" "$?"' EXIT
__mol_status() { return "$1"; }
__mol_rc=0
while IFS= builtin read -r -d '' -u 63 __mol_cmd; do
  __mol_status "$__mol_rc"
  builtin eval "$__mol_cmd" 2>&1
  __mol_rc=$?
  builtin printf '%s%d\n' "$__mol_mark" "$__mol_rc"
done
"""
"""The command shell's loop; ``$1`` is the marker token."""

CONTROL_SCRIPT = r"""
__mol_mark="__mol_$1_"
__mol_sweep() {
  local up ticks since p stat pass found killed=0 spare=" 1 $$ ${*:2} "
  local -a f
  builtin read -r up _ </proc/uptime
  ticks=${up/./}
  since=$(( 10#$ticks - $1 ))
  for (( pass = 0; pass < 200; pass++ )); do
    found=0
    for p in /proc/[0-9]*; do
      p=${p#/proc/}
      [[ $spare == *" $p "* ]] && continue
      builtin read -r stat 2>/dev/null <"/proc/$p/stat" || continue
      builtin read -r -a f <<<"${stat##*) }"
      (( f[19] >= since )) || continue
      builtin kill -KILL "$p" 2>/dev/null && found=1 && killed=$(( killed + 1 ))
    done
    (( found )) || break
  done
  builtin printf '%s%d\n' "$__mol_mark" "$killed"
}
__mol_kill() { builtin kill -KILL "$@" 2>/dev/null; builtin printf '%s%d\n' "$__mol_mark" "$?"; }
while IFS= builtin read -r __mol_line; do builtin eval "$__mol_line"; done
"""
"""The control shell (the container's main process). ``__mol_sweep TICKS PIDS...`` kills
every process started in the last TICKS clock ticks except PIDS, init and itself."""

TICKS_PER_SECOND = 100
"""Linux ``USER_HZ``: the unit of ``/proc/uptime`` decimals and of process start times."""

GRACE = 3.0
"""Seconds a command shell gets to report after its command's processes were killed."""


@dataclass(frozen=True)
class CommandResult:
    """What one command did: its capped output, exit code and what went wrong."""

    output: str
    """Output (stderr merged into stdout), printable, head and tail kept within the cap."""
    exit_code: int | None
    """The command's exit status; ``None`` when the shell died or was killed."""
    timed_out: bool = False
    timeout: float = 0.0
    total_bytes: int = 0
    """Bytes the command printed."""
    dropped_bytes: int = 0
    """Bytes left out of ``output`` (the middle of a long output)."""
    shell_exited: bool = False
    """The shell ended during this command (``exit``, ``set -e``, killed after a timeout)."""
    fresh_shell: bool = False
    """This command ran in a fresh shell because the previous one had ended."""
    duration: float = 0.0

    def notes(self) -> list[str]:
        """Plain sentences about timeouts, truncation and shell restarts."""
        notes = []
        if self.fresh_shell:
            notes.append("A fresh shell was started for this command (the previous one had "
                         "exited): working directory and variables were reset.")
        if self.timed_out:
            notes.append(f"Timed out after {self.timeout:g} s: the command and every process "
                         "it started were killed.")
        if self.dropped_bytes:
            notes.append(f"Output truncated: {self.dropped_bytes} of {self.total_bytes} bytes "
                         "were dropped from the middle.")
        if self.shell_exited:
            notes.append("The shell exited; the next command starts a fresh one (working "
                         "directory and variables reset).")
        if self.exit_code is not None and self.exit_code >= 128 and not self.timed_out:
            signal = self.exit_code - 128
            hint = " (out of memory?)" if signal == 9 else ""
            notes.append(f"The command was killed by signal {signal}{hint}.")
        return notes

    def render(self) -> str:
        """The text a model reads: output, exit code and notes."""
        parts = [self.output.rstrip("\n")] if self.output else []
        code = "none" if self.exit_code is None else str(self.exit_code)
        parts.append(f"[exit code: {code}]")
        parts += [f"[{note}]" for note in self.notes()]
        return "\n".join(parts)


class Control:
    """The container's main bash: kills processes by start time, using builtins only."""

    def __init__(self, sock: MuxSocket, token: str) -> None:
        self._sock = sock
        self._scanner = MarkerScanner(f"__mol_{token}_".encode())
        self._lock = anyio.Lock()
        self.pid = 0

    async def handshake(self) -> int:
        """Check the control shell answers; returns its pid."""
        self.pid = int(await self._ask("builtin printf '%s%d\\n' \"$__mol_mark\" $$"))
        return self.pid

    async def sweep(self, seconds: float, spare: list[int]) -> int:
        """Kill every process that started in the last ``seconds``, except ``spare``."""
        ticks = math.ceil(seconds * TICKS_PER_SECOND) + 2
        return int(await self._ask(f"__mol_sweep {ticks} {' '.join(map(str, spare))}"))

    async def kill(self, pid: int) -> None:
        """SIGKILL one process."""
        await self._ask(f"__mol_kill {pid}")

    async def _ask(self, line: str) -> str:
        async with self._lock:
            await self._sock.send(line.encode() + b"\n")
            return await self._answer()

    async def _answer(self) -> str:
        while True:
            for stream, payload in await self._sock.receive():
                if stream == STDOUT:
                    word = self._scanner.feed(payload)
                    if word is not None:
                        return word

    def close(self) -> None:
        """Drop the connection (the control shell keeps running until the container goes)."""
        self._sock.close()


class Shell:
    """One persistent command shell; not safe for concurrent commands (the sandbox locks)."""

    def __init__(self, sock: MuxSocket, token: str, control: Control) -> None:
        self._sock = sock
        self._scanner = MarkerScanner(f"__mol_{token}_".encode())
        self._control = control
        self._stderr: deque[bytes] = deque(maxlen=16)
        self.pid = 0
        self.alive = True

    @staticmethod
    def new_token() -> str:
        """A marker token no command output contains by accident."""
        return secrets.token_hex(8)

    async def handshake(self, timeout: float = 30.0) -> int:
        """Check the shell answers; returns its pid."""
        result = await self.run("builtin echo $$", timeout=timeout, limit=1024)
        if result.exit_code != 0:
            raise ShellDied(f"the sandbox shell did not start: {self.diagnostics() or result}")
        self.pid = int(result.output.strip())
        return self.pid

    def diagnostics(self) -> str:
        """The last things the shell wrote on its own stderr."""
        return b"".join(self._stderr).decode("utf-8", "replace").strip()

    async def run(self, command: str, *, timeout: float, limit: int,
                  on_output: Callable[[bytes], None] | None = None) -> CommandResult:
        """Run ``command`` in the shell; output beyond ``limit`` bytes keeps head and tail."""
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
        timed_out = False
        try:
            await self._sock.send(command.encode("utf-8", "surrogateescape") + b"\0")
            with anyio.move_on_after(timeout):
                word = await self._next_marker()
            if word is None:
                timed_out = True
                word = await self._stop(time.monotonic() - started)
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            word = None
        if word is None or word.startswith("exit"):
            self.close()
        code = _status(word)
        return CommandResult(
            output=cap.text(), exit_code=code, timed_out=timed_out, timeout=timeout,
            total_bytes=cap.total, dropped_bytes=cap.dropped, shell_exited=not self.alive,
            duration=time.monotonic() - started)

    async def _next_marker(self) -> str:
        while True:
            for stream, payload in await self._sock.receive():
                if stream != STDOUT:
                    self._stderr.append(payload[-512:])
                    continue
                word = self._scanner.feed(payload)
                if word is not None:
                    return word

    async def _stop(self, elapsed: float) -> str | None:
        """After a timeout: kill what the command started, then let the shell report."""
        await self._control.sweep(elapsed, [self.pid])
        with anyio.move_on_after(GRACE):
            return await self._next_marker()
        # A loop of builtins runs in the shell itself: only killing the shell stops it.
        await self._control.kill(self.pid)
        return None

    def close(self) -> None:
        """Forget this shell (its process, if alive, ends when its input closes)."""
        self.alive = False
        self._sock.close()


def _status(word: str | None) -> int | None:
    """The exit status in a marker word: ``0``, ``127``, ``exit 3``."""
    digits = (word or "").removeprefix("exit").strip()
    return int(digits) if digits.isdigit() else None
