"""``Idempotency-Key`` on POSTs: a retried request gets the stored result, not a second turn.

A POST carrying ``Idempotency-Key: K`` (1-255 printable ASCII characters) runs once. Its
response (status, headers, body; a streamed one as the bytes streamed) is kept under K,
with a digest of the route and body. Then:

- the same key, route and body again: the stored response, byte for byte, with
  ``Idempotent-Replayed: true``; the turn does not run again;
- the same key while the first request still runs: 409 with ``Retry-After: 1``;
- the same key with another route or body: 409.

Responses that invite a retry (429 and 5xx) and responses cut short (the client went
away) are not kept, so a retry runs. Keys live in the server process for ``ttl`` seconds,
at most ``capacity`` of them (least recently used dropped first), each response at most
``max_stored`` bytes; a restart forgets them.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import anyio

from mol.server.http.errors import ApiError

log = logging.getLogger("mol.server")

KEY = re.compile(r"[\x21-\x7e]{1,255}")
"""What an idempotency key may be: printable ASCII without spaces, 1 to 255 characters."""


@dataclass
class Entry:
    """A key's request and, once it finished, its response."""

    digest: str
    done: bool = False
    status: int = 0
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    body: bytearray = field(default_factory=bytearray)
    at: float = field(default_factory=time.monotonic)


class Idempotency:
    """ASGI middleware keeping POST responses by ``Idempotency-Key`` (after authentication)."""

    def __init__(self, app: Any, *, max_body: int, body_timeout: float,
                 capacity: int = 1024, ttl: float = 24 * 3600.0,
                 max_stored: int = 8 << 20) -> None:
        self.app = app
        self.max_body, self.body_timeout = max_body, body_timeout
        self.capacity, self.ttl, self.max_stored = capacity, ttl, max_stored
        self._entries: OrderedDict[str, Entry] = OrderedDict()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        keys = [v for k, v in scope.get("headers", []) if k == b"idempotency-key"]
        if scope["type"] != "http" or scope["method"] != "POST" or not keys:
            await self.app(scope, receive, send)
            return
        try:
            key = _key(keys)
            body = await self._body(receive)
        except ApiError as error:
            await error.response(scope)(scope, receive, send)
            return
        digest = hashlib.sha256(scope["path"].encode() + b"\0" + body).hexdigest()
        self._expire()
        entry = self._entries.get(key)
        if entry is not None:
            await self._answer_again(entry, digest, scope, receive, send)
            return
        entry = self._entries[key] = Entry(digest)
        await self._run(key, entry, body, scope, receive, send)

    async def _run(self, key: str, entry: Entry, body: bytes, scope: dict[str, Any],
                   receive: Any, send: Any) -> None:
        sent_body = False

        async def replay() -> dict[str, Any]:
            nonlocal sent_body
            if sent_body:  # after the body: the client's own disconnect, when it comes
                return await receive()
            sent_body = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def keep(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                entry.status, entry.headers = message["status"], list(message["headers"])
            elif message["type"] == "http.response.body":
                if len(entry.body) <= self.max_stored:
                    entry.body += message.get("body", b"")
                entry.done = not message.get("more_body", False)
            await send(message)

        try:
            await self.app(scope, replay, keep)
        finally:
            if not entry.done or entry.status == 429 or entry.status >= 500 \
                    or len(entry.body) > self.max_stored:
                self._entries.pop(key, None)  # a retry should run
            else:
                self._entries.move_to_end(key)
                while len(self._entries) > self.capacity:
                    self._entries.popitem(last=False)

    async def _answer_again(self, entry: Entry, digest: str, scope: dict[str, Any],
                            receive: Any, send: Any) -> None:
        if entry.digest != digest:
            error = ApiError(409, "this Idempotency-Key was used for a different request "
                             "(another route or body); use a new key", param="Idempotency-Key",
                             code="idempotency_key_reused")
        elif not entry.done:
            error = ApiError(409, "a request with this Idempotency-Key is still running; "
                             "retry shortly", param="Idempotency-Key",
                             code="idempotency_key_in_use", headers={"Retry-After": "1"})
        else:
            headers = [*entry.headers, (b"idempotent-replayed", b"true")]
            await send({"type": "http.response.start", "status": entry.status,
                        "headers": headers})
            await send({"type": "http.response.body", "body": bytes(entry.body)})
            return
        await error.response(scope)(scope, receive, send)

    async def _body(self, receive: Any) -> bytes:
        chunks, size = [], 0
        try:
            with anyio.fail_after(self.body_timeout):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        log.info("the client went away mid-body (%d bytes received)", size)
                        raise ApiError(400, "the client went away before sending the body")
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > self.max_body:
                        raise ApiError(413, f"the request body exceeds the limit of "
                                       f"{self.max_body} bytes")
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        return b"".join(chunks)
        except TimeoutError:
            raise ApiError(408, f"the request body did not arrive within "
                           f"{self.body_timeout:g} s", headers={"Connection": "close"}) from None

    def _expire(self) -> None:
        now = time.monotonic()
        while self._entries:
            key, oldest = next(iter(self._entries.items()))
            if oldest.done and now - oldest.at > self.ttl:
                del self._entries[key]
            else:
                return


def _key(values: list[bytes]) -> str:
    text = values[0].decode("latin-1")
    if len(values) != 1 or not KEY.fullmatch(text):
        raise ApiError(400, "Idempotency-Key must be one header of 1 to 255 printable ASCII "
                       "characters without spaces", param="Idempotency-Key")
    return text
