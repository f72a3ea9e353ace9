"""The stdio wire of ``mol acp``: one JSON-RPC message per line on stdin and stdout, and
nothing else on stdout.

``claim_stdio`` takes the process's stdin and stdout for the protocol before anything else
runs: it keeps private duplicates of both (not inherited by child processes) and points
descriptors 0 and 1 elsewhere (``/dev/null`` and stderr). A stray ``print`` (a library, a
plugin) or a child that inherits the descriptors (an MCP server, a hook, the Docker CLI)
then writes to stderr and reads nothing, instead of corrupting the protocol or eating the
editor's messages.

``Wire`` moves messages over those descriptors for the SDK's connection (its message
transport: ``send``, ``receive``, ``close``). A line that is not JSON, or not a JSON-RPC
message, is answered with the JSON-RPC error (``-32700``, ``-32600``, saying what is
wrong) and skipped; the SDK would only log it.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio

from mol.acpagent.sdk import INVALID_REQUEST, PARSE_ERROR, error_message

MAX_MESSAGE = 64 * 1024 * 1024
"""Bytes one incoming message may take (a prompt with files embedded is large)."""
CHUNK = 1 << 16


def claim_stdio() -> tuple[int, int]:
    """The protocol's own descriptors ``(reading, writing)``; descriptor 0 is then
    ``/dev/null`` and descriptor 1 (and ``sys.stdout``) stderr."""
    sys.stdout.flush()
    reading, writing = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return reading, writing


def encoded(message: dict[str, Any]) -> bytes:
    """One message as its line (UTF-8; a newline inside a string is escaped by JSON)."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def problem(message: Any) -> str | None:
    """Why a parsed line is not a JSON-RPC 2.0 message ACP sends, or None."""
    if not isinstance(message, dict):
        kind = "an array (ACP sends no batches)" if isinstance(message, list) else type(
            message).__name__
        return f"a message must be a JSON object, not {kind}"
    if message.get("jsonrpc") != "2.0":
        return f"jsonrpc: must be \"2.0\", got {json.dumps(message.get('jsonrpc'))}"
    if "method" in message and not isinstance(message["method"], str):
        return "method: must be a string"
    if "method" not in message and "id" not in message:
        return "a message needs a method (a request or notification) or an id (a response)"
    return None


class Wire:
    """Newline-delimited JSON-RPC over two descriptors (``claim_stdio``'s, or pipes)."""

    def __init__(self, reading: int, writing: int, *, limit: int = MAX_MESSAGE) -> None:
        os.set_blocking(reading, False)
        os.set_blocking(writing, False)
        self.reading, self.writing, self.limit = reading, writing, limit
        self._buffer = bytearray()
        self._eof = self._skipping = self._closed = False
        self._lock = anyio.Lock()
        self._after: dict[str, list[dict[str, Any]]] = {}
        self.on_answer: Any = None
        """Called once a response to one of the editor's requests is written."""

    def after_result(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        """Send ``messages`` right after the response whose result names ``session_id``
        (a new session's commands reach the client once it knows the session)."""
        self._after.setdefault(session_id, []).extend(messages)

    async def receive(self) -> dict[str, Any] | None:
        """The next message; None once the client closed its end."""
        while True:
            line = await self._line()
            if line is None:
                return None
            line = line.strip()
            if not line:
                continue
            try:
                message = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                detail = (f"{exc.msg} at column {exc.colno}" if isinstance(
                    exc, json.JSONDecodeError) else "not UTF-8")
                await self._write_all([error_message(PARSE_ERROR, f"Parse error: {detail}")])
                continue
            wrong = problem(message)
            if wrong is None:
                return message
            request_id = message.get("id") if isinstance(message, dict) else None
            await self._write_all([error_message(
                INVALID_REQUEST, f"Invalid request: {wrong}",
                request_id if isinstance(request_id, int | str) else None)])

    async def send(self, message: dict[str, Any]) -> None:
        """Write one message (then what waits for it, ``after_result``)."""
        result = message.get("result")
        later = (self._after.pop(result["sessionId"], [])
                 if isinstance(result, dict) and isinstance(result.get("sessionId"), str)
                 and "id" in message else [])
        await self._write_all([message, *later])
        if "id" in message and ("result" in message or "error" in message) and self.on_answer:
            self.on_answer()

    async def _write_all(self, messages: list[dict[str, Any]]) -> None:
        # Never cut short: half a line would break the protocol for good.
        with anyio.CancelScope(shield=True):
            async with self._lock:
                if self._closed:
                    raise ConnectionError("the connection is closed")
                for line in messages:
                    await self._write(encoded(line))

    async def close(self) -> None:
        """Close both descriptors (once), after the message being written."""
        with anyio.CancelScope(shield=True):
            async with self._lock:
                if self._closed:
                    return
                self._closed = True
        for fd in (self.reading, self.writing):
            try:
                os.close(fd)
            except OSError:
                pass

    async def _line(self) -> bytes | None:
        while True:
            end = self._buffer.find(b"\n")
            if end > self.limit or (end < 0 and len(self._buffer) > self.limit):
                del self._buffer[:end + 1 if end >= 0 else len(self._buffer)]
                self._skipping = end < 0  # its end is yet to come: skipped as it does
                await self._write_all([error_message(
                    INVALID_REQUEST, f"Invalid request: a message over {self.limit} bytes")])
                continue
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[:end + 1]
                return line
            if self._eof:
                line, self._buffer = bytes(self._buffer), bytearray()
                return line or None
            chunk = await self._read()
            if not chunk:
                self._eof = True
            elif self._skipping:  # the rest of a message too long to read
                end = chunk.find(b"\n")
                if end >= 0:
                    self._skipping = False
                    self._buffer += chunk[end + 1:]
            else:
                self._buffer += chunk

    async def _read(self) -> bytes:
        while True:
            try:
                return os.read(self.reading, CHUNK)
            except BlockingIOError:
                await anyio.wait_readable(self.reading)

    async def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.writing, view):]
            except BlockingIOError:
                await anyio.wait_writable(self.writing)
            except BrokenPipeError as exc:
                raise ConnectionError("the client closed its end of the connection") from exc
