"""The HCP JSON Schema, as committed in ``hcp/schema.json``."""

from __future__ import annotations

import json
from pathlib import Path

SCHEMA_FILE = Path(__file__).with_name("schema.json")
"""The committed export; a test fails when it drifts from the models."""


def json_schema() -> dict:
    """The JSON Schema of the current HCP document."""
    from mol.hcp.docstrings import DocumentedSchema
    from mol.hcp.schema import HCP

    schema = HCP.model_json_schema(mode="validation", schema_generator=DocumentedSchema)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def json_schema_text() -> str:
    """The schema as stable, indented JSON text."""
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"


REFERENCE_FILE = Path(__file__).resolve().parents[1] / "docs" / "hcp-reference.md"
"""The committed field reference; a test fails when it drifts from the models."""


def markdown_reference() -> str:
    """Every HCP section and field with its type, default and description, as Markdown."""
    schema = json_schema()
    definitions = schema["$defs"]
    lines = ["# HCP field reference", "",
             "Generated from the schema by `mol hcp schema --markdown`; do not edit by hand.",
             "The JSON Schema itself is `hcp/schema.json` (`mol hcp schema`).", ""]

    def section(title: str, definition: dict) -> None:
        lines.extend([f"## {title}", "", " ".join(definition.get("description", "").split()),
                      "", "| key | type | default | meaning |", "| --- | --- | --- | --- |"])
        required = set(definition.get("required", []))
        for key, spec in definition.get("properties", {}).items():
            default = "required" if key in required else _default(spec)
            meaning = " ".join(spec.get("description", "").split()).replace("|", "\\|")
            lines.append(f"| `{key}` | {_type(spec)} | {default} | {meaning} |")
        lines.append("")

    section("top level", schema)
    for name in sorted(definitions):
        section(name, definitions[name])
    return "\n".join(lines)


def _type(spec: dict) -> str:
    if "$ref" in spec:
        return spec["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in spec or "oneOf" in spec:
        options = spec.get("anyOf") or spec.get("oneOf")
        return " or ".join(_type(option) for option in options)
    kind = spec.get("type", "any")
    if "enum" in spec:
        return " \\| ".join(f'`"{v}"`' for v in spec["enum"])
    if "const" in spec:
        return f'`"{spec["const"]}"`'
    if kind == "array":
        return f"list of {_type(spec.get('items', {}))}"
    if kind == "object":
        values = spec.get("additionalProperties") or next(
            iter(spec.get("patternProperties", {}).values()), None)
        if isinstance(values, dict):
            return f"table of {_type(values)}"
    return kind


def _default(spec: dict) -> str:
    if "default" not in spec:
        return ""
    value = spec["default"]
    return "none" if value is None else f"`{json.dumps(value)}`"
