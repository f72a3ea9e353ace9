"""The HTTP clients mol opens for an engine's own endpoints, besides litellm's completions
(its model list, its tokenizer, health checks).

A client is opened per call (these calls are rare), but creating one loads the system's
certificate store, about 26 ms: once per ``mol run``, per health poll, per ``Runtime``.
An engine on ``http://`` (loopback, a cluster's internal address) needs none; one on
``https://`` gets the store loaded once per process."""

from __future__ import annotations

from functools import cache
from typing import Any


@cache
def _trusted() -> Any:
    """httpx's default TLS context (its certificate store), built once."""
    import httpx

    return httpx.create_ssl_context()


def http_client(url: str, timeout: float) -> Any:
    """An ``httpx.AsyncClient`` for requests to ``url``'s host: TLS verified as httpx's
    default does for ``https://``; no certificate store loaded for plain HTTP (the client
    does not follow redirects, so a request cannot move to TLS unverified)."""
    import httpx

    secure = url.lower().startswith("https:")
    return httpx.AsyncClient(timeout=timeout, verify=_trusted() if secure else False)
