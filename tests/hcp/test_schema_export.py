"""The committed JSON Schema matches the models, and documents every field."""

from mol.cli.main import main
from mol.hcp.export import SCHEMA_FILE, json_schema, json_schema_text


def test_committed_schema_matches_the_models():
    assert SCHEMA_FILE.read_text() == json_schema_text(), (
        "hcp/schema.json is stale: run `mol hcp schema > hcp/schema.json`")


def test_every_field_has_a_description():
    schema = json_schema()
    missing = []
    for name, definition in [("HCP", schema), *schema["$defs"].items()]:
        for field, spec in definition.get("properties", {}).items():
            if not spec.get("description"):
                missing.append(f"{name}.{field}")
    assert missing == []


def test_cli_prints_the_schema(capsys):
    assert main(["hcp", "schema"]) == 0
    assert capsys.readouterr().out == json_schema_text()


def test_committed_field_reference_matches_the_models():
    from mol.hcp.export import REFERENCE_FILE, markdown_reference

    assert REFERENCE_FILE.read_text() == markdown_reference(), (
        "docs/hcp-reference.md is stale: run `mol hcp schema --markdown > docs/hcp-reference.md`")
