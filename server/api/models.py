"""The models clients may name: ``GET /v1/models``, ``GET /v1/models/{id}``, and what a
request's ``model`` resolves to.

Clients see the public model (it routes: route -> answer -> summary) and, with ``[server]
expose_adapters``, each adapter (it pins the turn). ``[server] model_aliases`` maps other
names onto one of them, so that clients naming their vendor's models (Claude Code names
Anthropic's) run unchanged; aliases are not listed. A request carrying
``anthropic-version`` gets the lists in the Anthropic API's shape.
"""

from __future__ import annotations

import fnmatch
import time
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from mol.hcp.loader import Artifact
from mol.hcp.schema import PUBLIC_MODEL
from mol.server.http.bodies import field
from mol.server.http.errors import ApiError, speaks_anthropic


class ServedModels:
    """The names a request's ``model`` may take, and what each runs."""

    def __init__(self, artifact: Artifact) -> None:
        doc = artifact.doc
        self.names = [doc.model.name, *(doc.adapter_names if doc.server.expose_adapters
                                        else [])]
        """The listed models: the public one first, then the exposed adapters."""
        self.public = doc.model.name
        self.aliases = {name: doc.model.name if target == PUBLIC_MODEL else target
                        for name, target in doc.server.model_aliases.items()}
        """Alias (a name or a glob) -> the public model's name or an adapter."""

    def lookup(self, name: str) -> str | None:
        """The served model or adapter ``name`` stands for, or None when it names none."""
        if name in self.names:
            return name
        if name in self.aliases:
            return self.aliases[name]
        return next((target for pattern, target in self.aliases.items()
                     if fnmatch.fnmatchcase(name, pattern)), None)

    def resolve(self, body: dict[str, Any], required: bool = True) -> str | None:
        """The adapter a request pins, or None for the public model, which routes (also when
        ``model`` is absent and not ``required``); any other name is a 404."""
        model = field(body, "model", str, required=required)
        if model is None:
            return None
        target = self.lookup(model)
        if target is None:
            raise ApiError(404, f"the model {model!r} does not exist; 'model' must be "
                           f"{' or '.join(map(repr, self.names))}", param="model",
                           code="model_not_found")
        return None if target == self.public else target


def _model_object(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": int(time.time()), "owned_by": "mol"}


def _model_info(name: str) -> dict[str, Any]:
    """A model in the Anthropic API's shape (``ModelInfo``)."""
    return {"type": "model", "id": name, "display_name": name,
            "created_at": datetime.fromtimestamp(0, UTC).isoformat().replace("+00:00", "Z")}


async def models(request: Request) -> Response:
    """``GET /v1/models``: the public model (and the adapters, when exposed)."""
    names = request.app.state.models.names
    if speaks_anthropic(request.scope):
        data = [_model_info(name) for name in names]
        return JSONResponse({"data": data, "first_id": names[0], "last_id": names[-1],
                             "has_more": False})
    return JSONResponse({"object": "list", "data": [_model_object(name) for name in names]})


async def model(request: Request) -> Response:
    """``GET /v1/models/{id}``: one served model, or 404 ``model_not_found``."""
    name = request.path_params["model_id"]
    if name not in request.app.state.models.names:
        raise ApiError(404, f"the model {name!r} does not exist", param="model",
                       code="model_not_found")
    return JSONResponse(_model_info(name) if speaks_anthropic(request.scope)
                        else _model_object(name))
