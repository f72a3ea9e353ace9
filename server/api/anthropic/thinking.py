"""Signatures of the ``thinking`` blocks mol sends, checked when a client sends them back.

A thinking block carries the engine's reasoning; its ``signature`` is an HMAC-SHA256 of the
text, keyed by a secret derived from the server's API key (every replica sharing the key
verifies every other's), base64-encoded. A client must send thinking blocks back unchanged
(or leave them out): one whose text or signature was changed, or that another server
issued, is refused with a 400 naming it, as Anthropic's API refuses it. A server without a
key (loopback only) derives the secret from a fixed string: its signatures catch changed
blocks, not forged ones. The reasoning itself never goes back to the engine through them:
each adapter keeps its own view.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from mol.server.http.auth import derived_secret

PURPOSE = b"mol thinking signature v1"
"""What the secret is derived from besides the key (so it serves no other purpose)."""


class Signer:
    """Signs and verifies thinking blocks with one server's secret."""

    def __init__(self, api_key: bytes | None) -> None:
        self._secret = derived_secret(api_key, PURPOSE)

    def sign(self, thinking: str) -> str:
        """The signature of a thinking block whose text is ``thinking``."""
        digest = hmac.new(self._secret, thinking.encode(), hashlib.sha256).digest()
        return base64.b64encode(digest).decode()

    def verify(self, thinking: str, signature: str) -> bool:
        """Whether ``signature`` is this server's for ``thinking`` (constant time)."""
        return hmac.compare_digest(self.sign(thinking).encode(), signature.encode())
