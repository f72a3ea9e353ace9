"""The HCP JSON Schema, as committed in ``hcp/schema.json``."""

from __future__ import annotations

import json
from pathlib import Path

SCHEMA_FILE = Path(__file__).with_name("schema.json")
"""The committed export; a test fails when it drifts from the models."""


def json_schema() -> dict:
    """The JSON Schema of the current HCP document."""
    from mol.hcp.schema import HCP

    schema = HCP.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def json_schema_text() -> str:
    """The schema as stable, indented JSON text."""
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"
