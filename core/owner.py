"""Who a process is, across pid reuse and reboots: host name, kernel boot id, pid and the
process's start time. Sandbox containers, MCP server processes and session leases name
their owner this way, so an owner that is provably gone can be told from one that runs.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Owner:
    """A process, identified across pid reuse and reboots."""

    host: str
    boot: str
    pid: int
    start: int

    def label(self) -> str:
        """The ``org.mol.owner`` label value."""
        return f"{self.host}/{self.boot}/{self.pid}/{self.start}"

    @classmethod
    def parse(cls, value: str) -> Owner | None:
        """Read a label value; ``None`` when it is malformed."""
        parts = value.rsplit("/", 3)
        if len(parts) != 4 or not parts[2].isdigit() or not parts[3].isdigit():
            return None
        return cls(parts[0], parts[1], int(parts[2]), int(parts[3]))

    def alive(self) -> bool | None:
        """Whether this process still runs; ``None`` when that cannot be told from here."""
        me = current()
        if self.host != me.host:
            return None
        if self.boot != me.boot:
            return False
        return start_ticks(self.pid) == self.start


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def start_ticks(pid: int) -> int | None:
    """A process's start time in clock ticks since boot; ``None`` if there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def current() -> Owner:
    """This process as an owner."""
    pid = os.getpid()
    return Owner(socket.gethostname(), _boot_id(), pid, start_ticks(pid) or 0)
