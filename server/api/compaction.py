"""OpenAI's compaction API on ``mol serve``: ``context_management``, ``POST
/v1/responses/compact`` and the ``compaction`` item.

- ``context_management: [{"type": "compaction", "compact_threshold": N}]`` on
  ``responses.create``: a request of the answering adapter that would take more than ``N``
  tokens compacts its view first (the lower of ``N`` and the artifact's threshold wins). A
  streamed response shows it as ``response.compaction.compacting`` and a ``compaction``
  output item.
- ``POST /v1/responses/compact`` (the request shape of ``responses.create``): compacts
  every adapter's view of the conversation the request continues (``previous_response_id``,
  a ``compaction`` item, or the input replayed) and answers a ``response.compaction``
  object: the conversation's user messages, then one ``compaction`` item. The compacted
  conversation is stored whatever ``store`` says: the item names it.
- A ``compaction`` item's ``encrypted_content`` is mol's own token: the key of a stored
  point of the conversation, sealed with an HMAC-SHA256 whose secret the server derives
  from its API key (``mol.server.http.auth.derived_secret``). Sent back first in ``input`` (what came before it is what it stands for), it
  continues the conversation from that point; an altered or forged token is a 400 naming
  the item.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

from mol.server.http.auth import derived_secret
from mol.server.http.bodies import json_kind
from mol.server.http.errors import ApiError

TOKEN_PREFIX = "molc1."
"""What every compaction token starts with (its format's version)."""


def secret_for(api_key: bytes | None) -> bytes:
    """The secret compaction tokens are sealed with (``derived_secret``)."""
    return derived_secret(api_key, b"mol compaction token")


def seal(secret: bytes, key: str) -> str:
    """The ``encrypted_content`` of a compaction item naming the stored point ``key``."""
    body = base64.urlsafe_b64encode(key.encode()).decode().rstrip("=")
    mac = hmac.new(secret, body.encode(), hashlib.sha256).hexdigest()
    return f"{TOKEN_PREFIX}{body}.{mac}"


def unseal(secret: bytes, token: Any, where: str) -> str:
    """The stored point a compaction item names; a 400 naming ``where`` when the token is
    not one this server sealed."""
    refused = ApiError(400, f"'{where}' is not a compaction token this server issued (it was "
                       "altered, forged, or sealed by another server)", param=where,
                       code="invalid_compaction_item")
    if not isinstance(token, str) or not token.startswith(TOKEN_PREFIX):
        raise refused
    body, _, mac = token[len(TOKEN_PREFIX):].partition(".")
    expected = hmac.new(secret, body.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(mac, expected):
        raise refused
    try:
        return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        raise refused from None


def threshold(body: dict[str, Any]) -> int | None:
    """``context_management``'s compaction threshold, in tokens (None without one)."""
    entries = body.get("context_management")
    if entries is None:
        return None
    if not isinstance(entries, list):
        raise ApiError(400, f"'context_management' must be an array, got {json_kind(entries)}",
                       param="context_management")
    found = None
    for i, entry in enumerate(entries):
        where = f"context_management[{i}]"
        if not isinstance(entry, dict) or entry.get("type") != "compaction":
            raise ApiError(400, f"'{where}.type' must be \"compaction\" (the one kind mol "
                           "manages)", param=f"{where}.type")
        value = entry.get("compact_threshold")
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ApiError(400, f"'{where}.compact_threshold' must be a whole number of tokens "
                           f">= 1, got {value!r}", param=f"{where}.compact_threshold")
        found = value if found is None else min(found, value)
    return found


def continued(body: dict[str, Any], secret: bytes) -> tuple[dict[str, Any], str | None]:
    """The body with its input cut after a ``compaction`` item, and the stored point that
    item names (None when the input holds none)."""
    items = body.get("input")
    if not isinstance(items, list):
        return body, None
    marks = [i for i, item in enumerate(items)
             if isinstance(item, dict) and item.get("type") == "compaction"]
    if not marks:
        return body, None
    last = marks[-1]
    where = f"input[{last}].encrypted_content"
    key = unseal(secret, items[last].get("encrypted_content"), where)
    if body.get("previous_response_id") is not None:
        raise ApiError(400, f"'input[{last}]' (a compaction item) and 'previous_response_id' "
                       "both name where the conversation goes on; send one of them",
                       param="previous_response_id")
    return {**body, "input": items[last + 1:]}, key
