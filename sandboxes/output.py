"""Bounded capture of command output: head and tail kept, the middle dropped.

A command may print gigabytes (``yes``, ``cat /dev/urandom``); the runtime must
not. ``OutputCap`` keeps the first half of ``limit`` bytes and a rolling tail
of the other half, so its memory stays below ``2 * limit`` plus one chunk
whatever the command prints. ``printable`` turns the kept bytes into text a
model can read: invalid UTF-8 and control characters become ``\\xNN`` escapes,
terminal colour codes are removed.
"""

from __future__ import annotations

import re

_CSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
"""ANSI control sequences (colours, cursor moves): noise to a model."""

_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F]}
"""Control characters except tab and newline, as visible escapes."""


def printable(data: bytes) -> str:
    """``data`` as readable text: UTF-8 where valid, ``\\xNN`` for the rest."""
    text = data.decode("utf-8", errors="backslashreplace").replace("\r\n", "\n")
    return _CSI.sub("", text).translate(_CONTROL)


def dropped_marker(count: int) -> str:
    """The line that stands in for ``count`` dropped bytes."""
    return f"[... {count} bytes dropped ...]"


class OutputCap:
    """Keeps the head and tail of a byte stream within ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._head_limit = limit // 2
        self._tail_limit = limit - self._head_limit
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0
        """Bytes fed so far."""

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Account for ``data``, keeping what fits in the head and the tail."""
        size = len(data)
        if not size:
            return
        self.total += size
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if len(data) >= self._tail_limit:
            self._tail[:] = data[-self._tail_limit:]
            return
        self._tail += data
        # Trim in batches: amortized O(1) per byte instead of a shift per chunk.
        if len(self._tail) > 2 * self._tail_limit:
            del self._tail[: len(self._tail) - self._tail_limit]

    @property
    def dropped(self) -> int:
        """Bytes that were fed but are not kept."""
        return max(0, self.total - self.limit)

    def text(self) -> str:
        """The kept output as printable text, with a marker where bytes were dropped."""
        tail = self._tail[-self._tail_limit:] if self.dropped else self._tail
        if not self.dropped:
            return printable(bytes(self._head + tail))
        head = printable(bytes(self._head))
        separator = "" if head.endswith("\n") else "\n"
        return f"{head}{separator}{dropped_marker(self.dropped)}\n{printable(bytes(tail))}"
