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
starts a fresh one. After timeouts, slow commands, and at most once a second
otherwise, the control shell also counts processes: a fork bomb left running
in the background (near ``pids_limit``) is swept away whole.
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
__mol_n=0
while IFS= builtin read -r -d '' -u 63 __mol_cmd; do
  (( __mol_n += 1 ))
  builtin export MOL_COMMAND="$1-$__mol_n"
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
  local up ticks since=0 p stat pass found tag v killed=0 spare=" 1 $$ ${*:3} "
  local -a f e
  builtin read -r up _ </proc/uptime
  ticks=${up/./}
  (( $1 < 0 )) || since=$(( 10#$ticks - $1 ))
  for (( pass = 0; pass < 200; pass++ )); do
    found=0
    for p in /proc/[0-9]*; do
      p=${p#/proc/}
      [[ $spare == *" $p "* ]] && continue
      builtin read -r stat 2>/dev/null <"/proc/$p/stat" || continue
      builtin read -r -a f <<<"${stat##*) }"
      (( f[19] >= since )) || continue
      if [[ $2 != - ]]; then  # spare what an earlier command started (its MOL_COMMAND)
        tag=""
        builtin mapfile -d '' -t e 2>/dev/null <"/proc/$p/environ"
        for v in "${e[@]}"; do [[ $v == MOL_COMMAND=* ]] && tag=${v#MOL_COMMAND=}; done
        [[ -z $tag || $tag == "$2" ]] || continue
      fi
      builtin kill -KILL "$p" 2>/dev/null && found=1 && killed=$(( killed + 1 ))
    done
    (( found )) || break
  done
  builtin printf '%s%d\n' "$__mol_mark" "$killed"
}
__mol_count() { local -a all=(/proc/[0-9]*); builtin printf '%s%d\n' "$__mol_mark" "${#all[@]}"; }
__mol_kill() { builtin kill "$@" 2>/dev/null; builtin printf '%s%d\n' "$__mol_mark" "$?"; }
while IFS= builtin read -r __mol_line; do builtin eval "$__mol_line"; done
"""
"""The control shell (the container's main process). ``__mol_sweep TICKS TAG PIDS...``
kills every process started in the last TICKS clock ticks (whenever, for -1) except
PIDS, init and itself, and except processes whose ``MOL_COMMAND`` names another command
than TAG (``-``: kill regardless). The command shell exports ``MOL_COMMAND`` per command;
forked subshells that never exec'd carry none and count as recent."""

TICKS_PER_SECOND = 100
"""Linux ``USER_HZ``: the unit of ``/proc/uptime`` decimals and of process start times."""

CONTROL_DEADLINE = 30.0
"""Seconds the control shell may take to answer (a sweep of a fork bomb included)."""

SLOW = 0.25
"""Seconds after which a command's end also checks the sandbox's process count."""

BOMB_SHARE = 0.75
"""Share of ``pids_limit`` in processes (not threads) at which every process but the shell
is killed: a fork bomb pinned at the limit, most likely."""

CHECK_EVERY = 1.0
"""Seconds between process-count checks after quick commands."""

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
    process_limit_kills: int = 0
    """Processes killed because the sandbox hit ``pids_limit`` after this command."""
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
        if self.process_limit_kills:
            notes.append(f"The sandbox reached its process limit (a fork bomb?): "
                         f"{self.process_limit_kills} processes were killed, all but the "
                         "shell.")
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

    async def sweep(self, seconds: float | None, spare: list[int], tag: str = "-") -> int:
        """Kill every process that started in the last ``seconds`` (``None``: whenever)
        for command ``tag``, except ``spare``; returns how many were killed."""
        ticks = -1 if seconds is None else math.ceil(seconds * TICKS_PER_SECOND) + 2
        pids = " ".join(map(str, spare))
        return int(await self._ask(f"__mol_sweep {ticks} {tag or '-'} {pids}"))

    async def count(self) -> int:
        """How many processes the sandbox holds."""
        return int(await self._ask("__mol_count"))

    async def kill(self, pid: int, signal: str = "KILL") -> None:
        """Send ``signal`` (default SIGKILL) to one process."""
        await self._ask(f"__mol_kill -{signal} {pid}")

    async def _ask(self, line: str) -> str:
        # Shielded: an exchange cut in half would leave its answer to the next question.
        with anyio.CancelScope(shield=True):
            async with self._lock:
                try:
                    with anyio.fail_after(CONTROL_DEADLINE):
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
        self._sock.close()


class Shell:
    """One persistent command shell; not safe for concurrent commands (the sandbox locks)."""

    def __init__(self, sock: MuxSocket, token: str, control: Control, *,
                 pids_limit: int = 0) -> None:
        self._sock = sock
        self._scanner = MarkerScanner(f"__mol_{token}_".encode())
        self._control = control
        self._pids_limit = pids_limit
        self._token = token
        self._count = 0
        self._checked = time.monotonic()
        self._bomb_kills = 0
        self._stderr: deque[bytes] = deque(maxlen=16)
        self.pid = 0
        self.alive = True

    @staticmethod
    def new_token() -> str:
        """A marker token no command output contains by accident."""
        return secrets.token_hex(8)

    async def handshake(self, timeout: float = 30.0) -> int:  # noqa: ASYNC109 (kills in-sandbox processes)
        """Check the shell answers; returns its pid."""
        result = await self.run("builtin echo $$", timeout=timeout, limit=1024)
        if result.exit_code != 0:
            raise ShellDied(f"the sandbox shell did not start: {self.diagnostics() or result}")
        self.pid = int(result.output.strip())
        await self._reap()
        return self.pid

    def diagnostics(self) -> str:
        """The last things the shell wrote on its own stderr."""
        return b"".join(self._stderr).decode("utf-8", "replace").strip()

    async def run(self, command: str, *, timeout: float, limit: int,  # noqa: ASYNC109 (kills in-sandbox processes)
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
        self._count += 1
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
        except BaseException:
            # Cancelled (or the output callback failed) mid-command: this shell's stream is
            # no longer in step with its commands, so end the command and the shell.
            with anyio.CancelScope(shield=True), anyio.move_on_after(GRACE):
                await self._abandon(time.monotonic() - started)
            raise
        if word is None or word.startswith("exit"):
            self.close()
        duration = time.monotonic() - started
        reaped, self._bomb_kills = self._bomb_kills, 0
        if not reaped and self.pid and self._check_due(duration):
            reaped = await self._reap()
        return CommandResult(
            output=cap.text(), exit_code=_status(word), timed_out=timed_out, timeout=timeout,
            total_bytes=cap.total, dropped_bytes=cap.dropped, shell_exited=not self.alive,
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

    async def _reap(self) -> int:
        """Near the process limit (a fork bomb, most likely), kill every other process."""
        limit = self._pids_limit
        if not limit or await self._control.count() < BOMB_SHARE * limit:
            return 0
        return max(1, await self._control.sweep(None, [self.pid] if self.alive else []))

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
        await self._control.sweep(elapsed, [self.pid], f"{self._token}-{self._count}")
        # A fork bomb left by an earlier command may be what held this one up.
        self._bomb_kills = await self._reap()
        with anyio.move_on_after(GRACE):
            return await self._next_marker()
        # A loop of builtins runs in the shell itself: only killing the shell stops it.
        await self._control.kill(self.pid)
        return None

    async def _abandon(self, elapsed: float) -> None:
        try:
            await self._control.sweep(elapsed, [self.pid], f"{self._token}-{self._count}")
            await self._control.kill(self.pid)
        except ShellDied:
            pass  # the control shell is gone too; the error being raised says more
        finally:
            self.close()

    def close(self) -> None:
        """Forget this shell (its process, if alive, ends when its input closes)."""
        self.alive = False
        self._sock.close()


def _status(word: str | None) -> int | None:
    """The exit status in a marker word: ``0``, ``127``, ``exit 3``."""
    digits = (word or "").removeprefix("exit").strip()
    return int(digits) if digits.isdigit() else None
