"""The server of the OpenAI and Anthropic APIs (``mol serve``).

``app`` builds the Starlette app and runs it on uvicorn. ``http`` holds what every route
shares (the key, transport bounds, errors in either API's shape, bodies, SSE); ``api`` the
API shapes, siblings over the same turn plumbing: ``chat`` (Chat Completions),
``responses`` and ``sockets`` (the Responses API over HTTP and a WebSocket), ``anthropic``
(the Anthropic Messages API); ``turns`` runs turns in the background and names the points
of conversations that stateless clients continue (docs/architecture.md, "The map").
"""

from mol.server.app import ServerConfig, create_app, serve

__all__ = ["ServerConfig", "create_app", "serve"]
