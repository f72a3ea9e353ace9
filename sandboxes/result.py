"""What one command did: its capped output, exit code, and the notes a model reads.

``Shell.run`` builds a ``CommandResult``; ``Sandbox.run`` marks it when the command ran in
a fresh shell or a fresh sandbox; the terminal tool and the eval recording read it. It
lives apart from the shell protocol because everything above the sandbox reads it, and
none of that needs to know how a command is run or stopped: the sentences a model is
shown about timeouts, truncation, lost state and replaced sandboxes are written here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class CommandResult:
    """What one command did: its capped output, exit code and what went wrong."""

    output: str
    """Output (stderr merged into stdout), printable, head and tail kept within the cap."""
    exit_code: int | None
    """The command's exit status; ``None`` when the sandbox stopped answering."""
    timed_out: bool = False
    timeout: float = 0.0
    total_bytes: int = 0
    """Bytes the command printed."""
    dropped_bytes: int = 0
    """Bytes left out of ``output`` (the middle of a long output)."""
    shell_exited: bool = False
    """The sandbox stopped answering during this command and was killed; the next command
    runs in a fresh one."""
    fresh_shell: bool = False
    """This command ran in a fresh command shell (the shell state was kept)."""
    fresh_sandbox: bool = False
    """This command ran in a fresh sandbox: the previous one had stopped answering."""
    state_lost: bool = False
    """The command's shell was killed, so what it changed of the shell state is lost."""
    process_limit_kills: int = 0
    """Processes killed because the sandbox hit ``pids_limit`` after this command."""
    duration: float = 0.0

    def notes(self) -> list[str]:
        """Plain sentences about timeouts, truncation and replaced sandboxes."""
        notes = []
        if self.fresh_sandbox:
            notes.append("A fresh sandbox was started for this command (the previous one had "
                         "stopped answering): files, working directory and variables were "
                         "reset.")
        if self.timed_out:
            notes.append(f"Timed out after {self.timeout:g} s: the command and every process "
                         "it started were killed.")
        if self.state_lost:
            notes.append("The command's changes to the working directory and variables were "
                         "not kept.")
        if self.dropped_bytes:
            notes.append(f"Output truncated: {self.dropped_bytes} of {self.total_bytes} bytes "
                         "were dropped from the middle.")
        if self.process_limit_kills:
            notes.append(f"The sandbox reached its process limit (a fork bomb?): "
                         f"{self.process_limit_kills} processes were killed, all but the "
                         "shells.")
        if self.shell_exited:
            notes.append("The sandbox stopped answering and was killed; the next command "
                         "starts in a fresh one (files in the workspace are lost).")
        if self.exit_code is not None and self.exit_code >= 128 and not self.timed_out:
            signal = self.exit_code - 128
            hint = " (out of memory?)" if signal == 9 else ""
            notes.append(f"The command was killed by signal {signal}{hint}.")
        return notes

    def render(self) -> str:
        """The text a model reads: output, then mol's own lines (each wholly in brackets):
        the exit code (not for a command that timed out: it was killed, whatever it
        printed) and the notes. An output line that looks like one of mol's gets one more
        backslash in front (``\\[exit code: 0]``), so no output can forge them."""
        parts = [escape_own_lines(self.output.rstrip("\n"))] if self.output else []
        if not self.timed_out:
            code = "none" if self.exit_code is None else str(self.exit_code)
            parts.append(f"[exit code: {code}]")
        parts += [f"[{note}]" for note in self.notes()]
        return "\n".join(parts)


OWN_LINE = re.compile(r"^\\*\[.*\]$", re.MULTILINE)
"""A line shaped like mol's own in a result (``[exit code: 0]``, ``[Timed out after 3 s:
...]``): wholly in brackets, after any backslashes (so an escaped one is escaped again)."""


def escape_own_lines(output: str) -> str:
    """A command's output with each line shaped like mol's own (``OWN_LINE``) behind one
    more backslash: what mol appends to a result stays the only such lines in it."""
    return OWN_LINE.sub(r"\\\g<0>", output)
