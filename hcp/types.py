"""Walk the schema's types along a key path (for suggestions and docs)."""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel


def _candidates(annotation: Any) -> list[Any]:
    """Unwrap Annotated / Optional / unions into the concrete types they allow."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _candidates(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        out: list[Any] = []
        for arg in typing.get_args(annotation):
            out += _candidates(arg)
        return out
    return [annotation]


def _step(annotation: Any, part: Any) -> Any:
    for candidate in _candidates(annotation):
        origin = typing.get_origin(candidate)
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            if isinstance(part, str) and part in candidate.model_fields:
                return candidate.model_fields[part].annotation
        elif origin is list and isinstance(part, int):
            return typing.get_args(candidate)[0]
        elif origin is dict and isinstance(part, str):
            return typing.get_args(candidate)[1]
    return None


def model_at(root: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The pydantic model class found at key path ``loc`` under ``root``, if any."""
    annotation: Any = root
    for part in loc:
        annotation = _step(annotation, part)
        if annotation is None:
            return None
    for candidate in _candidates(annotation):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None
