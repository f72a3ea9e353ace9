"""The base model and field types every HCP section shares."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

EnvVarName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
Digest = Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")]
PositiveFloat = Annotated[float, Field(gt=0)]


class Model(BaseModel):
    """Base of every HCP section: strict about unknown keys, self-documenting."""

    model_config = ConfigDict(
        extra="forbid", use_attribute_docstrings=True, validate_default=True
    )
