"""``GET /v1/models`` and ``GET /v1/models/{id}``: the models clients may name."""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from mol.hcp.loader import Artifact
from mol.server.http.errors import ApiError


def served_models(artifact: Artifact) -> list[str]:
    """The model ids clients may name: the public model (it routes: route -> answer ->
    summary), then, with ``[server] expose_adapters``, each adapter (it pins the turn)."""
    doc = artifact.doc
    return [doc.model.name, *(doc.adapter_names if doc.server.expose_adapters else [])]


def _model_object(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": int(time.time()), "owned_by": "mol"}


async def models(request: Request) -> Response:
    """``GET /v1/models``: the public model (and the adapters, when exposed)."""
    data = [_model_object(name) for name in request.app.state.models]
    return JSONResponse({"object": "list", "data": data})


async def model(request: Request) -> Response:
    """``GET /v1/models/{id}``: one served model, or 404 ``model_not_found``."""
    name = request.path_params["model_id"]
    if name not in request.app.state.models:
        raise ApiError(404, f"the model {name!r} does not exist", param="model",
                       code="model_not_found")
    return JSONResponse(_model_object(name))
