"""Async I/O on a Docker attach or exec socket, and finding end markers in its output.

Without a TTY, Docker multiplexes a process's stdout and stderr on one
connection: each frame is an 8-byte header (stream id, three zero bytes, the
payload size as a big-endian u32) followed by the payload. ``MuxSocket`` reads
frames with non-blocking ``recv_into`` on a reused buffer (no thread, no copy
per call beyond the frame payload) and writes stdin bytes.

``MarkerScanner`` splits a byte stream at a marker line ``<prefix><word>\\n``:
bytes before the marker are command output, the word after it is the exit
status. It holds back only bytes that could begin a marker, so output streams
on at once and memory stays constant over any amount of output.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

import anyio

STDOUT, STDERR = 1, 2
"""Stream ids in Docker's frame headers."""

_RECV_SIZE = 1 << 18
_MAX_WORD = 32
"""Longest status word after a marker prefix ("exit 255" and the like)."""


class MuxSocket:
    """Non-blocking frames in, bytes out, on a socket this object owns."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self._sock = sock
        self._buffer = bytearray()
        self._scratch = bytearray(_RECV_SIZE)
        self.closed = False

    async def send(self, data: bytes) -> None:
        """Write ``data`` to the process's stdin."""
        view = memoryview(data)
        while view:
            try:
                sent = self._sock.send(view)
            except BlockingIOError:
                await anyio.wait_writable(self._sock)
                continue
            except OSError as exc:
                raise anyio.BrokenResourceError(str(exc)) from exc
            view = view[sent:]

    async def receive(self) -> list[tuple[int, bytes]]:
        """The next complete frames (at least one); ``anyio.EndOfStream`` at the end."""
        while True:
            frames = self._parse()
            if frames:
                return frames
            try:
                size = self._sock.recv_into(self._scratch)
            except BlockingIOError:
                await anyio.wait_readable(self._sock)
                continue
            except OSError as exc:
                raise anyio.EndOfStream from exc
            if size == 0:
                raise anyio.EndOfStream
            self._buffer += memoryview(self._scratch)[:size]

    def _parse(self) -> list[tuple[int, bytes]]:
        buffer, pos, frames = self._buffer, 0, []
        end = len(buffer)
        while end - pos >= 8:
            size = int.from_bytes(buffer[pos + 4:pos + 8], "big")
            if end - pos - 8 < size:
                break
            frames.append((buffer[pos], bytes(buffer[pos + 8:pos + 8 + size])))
            pos += 8 + size
        if pos:
            del buffer[:pos]
        return frames

    def close(self) -> None:
        """Close the connection (the process sees end of input)."""
        if not self.closed:
            self.closed = True
            self._sock.close()


class MarkerScanner:
    """Finds ``<prefix><word>\\n`` in a byte stream; passes the bytes before it on."""

    def __init__(self, prefix: bytes) -> None:
        self.prefix = prefix
        self._pending = b""
        self.sink: Callable[[bytes], None] = lambda data: None
        """Receives every output byte before the marker, in order."""

    def feed(self, data: bytes) -> str | None:
        """Consume ``data``; the marker's word once it is complete, else ``None``.

        Bytes after a marker are kept for the next command (late output of a
        background job, as a terminal would show it).
        """
        window = self._pending + data if self._pending else data
        start = 0
        while True:
            index = window.find(self.prefix, start)
            if index < 0:
                keep = self._partial(window, start)
                self._emit(window[start:len(window) - keep])
                self._pending = window[len(window) - keep:]
                return None
            newline = window.find(b"\n", index + len(self.prefix),
                                  index + len(self.prefix) + _MAX_WORD + 1)
            if newline < 0 and len(window) - index - len(self.prefix) <= _MAX_WORD:
                self._emit(window[start:index])
                self._pending = window[index:]
                return None
            if newline < 0:  # the prefix, but not a marker line: plain output
                self._emit(window[start:index + 1])
                start = index + 1
                continue
            self._emit(window[start:index])
            self._pending = window[newline + 1:]
            return window[index + len(self.prefix):newline].decode("ascii", "replace")

    def _partial(self, window: bytes, start: int) -> int:
        """Length of the longest tail of ``window`` that could begin a marker.

        Only that much is held back, so output streams on without waiting for more.
        """
        for size in range(min(len(window) - start, len(self.prefix) - 1), 0, -1):
            if window.endswith(self.prefix[:size]):
                return size
        return 0

    def _emit(self, data: bytes) -> None:
        if data:
            self.sink(data)
