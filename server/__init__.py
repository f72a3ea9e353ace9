"""The OpenAI-compatible server (``mol serve``).

``app`` builds the Starlette app and runs it on uvicorn; ``auth`` checks the
bearer key; ``http`` holds what every route shares (errors, bodies, SSE);
``messages`` reads both APIs' request bodies; ``runner`` runs turns in the
background; ``replies`` reads a turn's typed events for ``chat`` (Chat
Completions) and ``responses`` (the Responses API), which are siblings;
``marks`` names points of conversations so stateless clients continue them.
"""

from mol.server.app import ServerConfig, create_app, serve

__all__ = ["ServerConfig", "create_app", "serve"]
