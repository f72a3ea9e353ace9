"""What every HCP section shares: the strict, self-documenting base model, file references,
prompts, and the constrained string types (adapter, server and environment variable names)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

ADAPTER_NAME = r"^[A-Za-z][A-Za-z0-9_-]{0,31}$"
"""What an adapter's name looks like: it appears in model ids, call ids and CLI flags."""

AdapterName = Annotated[str, Field(pattern=ADAPTER_NAME)]
EnvVarName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
Digest = Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")]
PositiveFloat = Annotated[float, Field(gt=0)]

SERVER_NAME = r"^[A-Za-z0-9_-]+$"


class Model(BaseModel):
    """Base of every HCP section: strict about unknown keys, self-documenting (each field's
    docstring is its description in the JSON Schema: ``mol.hcp.docstrings``)."""

    model_config = ConfigDict(extra="forbid", validate_default=True)


class FileRef(Model):
    """A file named by the artifact, resolved relative to the artifact's folder."""

    path: str = Field(min_length=1)
    """Path of the file, relative to the artifact (absolute paths are allowed)."""


def _prompt_kind(value: object) -> str:
    return "file" if isinstance(value, dict | FileRef) else "text"


Prompt = Annotated[
    Annotated[str, Tag("text")] | Annotated[FileRef, Tag("file")],
    Discriminator(_prompt_kind),
]
"""A prompt is inline text or ``{ path = "prompts/x.md" }``."""
