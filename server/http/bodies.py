"""Request bodies: bounded in size, time and nesting, parsed off the event loop when large,
and field checks whose 400s name the field."""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
from starlette.requests import ClientDisconnect, Request

from mol.server.http.errors import ApiError

log = logging.getLogger("mol.server")

MAX_BODY = 4 * 1024 * 1024
"""Default limit of a request body, in bytes."""

MAX_DEPTH = 64
"""Deepest nesting of a request body's JSON (objects and arrays)."""

PARSE_INLINE = 64 * 1024
"""Bodies up to this many bytes are parsed on the event loop; larger ones in a thread."""


async def read_body(request: Request, limit: int) -> bytes:
    """The request body's bytes: 413 beyond ``limit`` bytes, 408 when it does not arrive
    within the app's ``body_timeout`` seconds, 400 (logged in one line) when the client
    went away before sending it all."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, f"the request body exceeds the limit of {limit} bytes")
    timeout = getattr(request.app.state, "body_timeout", None)
    chunks: list[bytes] = []
    size = 0
    try:
        with anyio.fail_after(timeout):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise ApiError(413, f"the request body exceeds the limit of {limit} bytes")
                chunks.append(chunk)
    except TimeoutError:
        raise ApiError(408, f"the request body did not arrive within {timeout:g} s",
                       headers={"Connection": "close"}) from None
    except ClientDisconnect:
        # Nobody is left to answer: one line in the log, no traceback.
        log.info("the client went away mid-body (%s %s, %d bytes received)",
                 request.method, request.url.path, size)
        raise ApiError(400, "the client went away before sending the whole body") from None
    return b"".join(chunks)


async def read_json(request: Request, limit: int) -> dict[str, Any]:
    """The request body as a JSON object; 413 beyond ``limit`` bytes, 408 when too slow,
    400 if malformed."""
    data = await read_body(request, limit)
    if len(data) <= PARSE_INLINE:
        body = parse_json(data)
    else:  # megabytes of JSON would hold every other connection up meanwhile
        body = await anyio.to_thread.run_sync(parse_json, data)
    if not isinstance(body, dict):
        raise ApiError(400, f"the request body must be a JSON object, got {json_kind(body)}")
    return body


def parse_json(data: bytes) -> Any:
    """A request body's JSON value: 400 when malformed or nested deeper than ``MAX_DEPTH``."""
    try:
        value = json.loads(data or b"null")
    except RecursionError:
        raise _too_deep() from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"the request body is not valid JSON: {exc}") from exc
    stack = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:  # iterative: a check that recursed would fail the way the parser did
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        if depth > MAX_DEPTH:
            raise _too_deep()
        stack.extend((child, depth + 1) for child in children
                     if isinstance(child, dict | list))
    return value


def json_kind(value: Any) -> str:
    """How a JSON value's type is named in error messages ('a string', 'null')."""
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string",
            list: "an array", dict: "an object"}.get(type(value), type(value).__name__)


def field(body: dict[str, Any], name: str, kinds: type | tuple[type, ...], *,
          required: bool = False, default: Any = None, where: str = "") -> Any:
    """``body[name]`` checked against ``kinds``; a 400 naming ``where + name`` otherwise."""
    path = f"{where}{name}"
    if name not in body or body[name] is None:
        if required:
            raise ApiError(400, f"missing required field '{path}'", param=path)
        return default
    value = body[name]
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
        names = " or ".join(json_kind(k()) if k is not float else "a number" for k in kinds)
        raise ApiError(400, f"'{path}' must be {names}, got {json_kind(value)}", param=path)
    return value


def _too_deep() -> ApiError:
    return ApiError(400, f"the request body nests deeper than {MAX_DEPTH} levels",
                    code="too_deep")
