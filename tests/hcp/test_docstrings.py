"""Field docstrings become JSON Schema descriptions only when a schema is generated."""

from __future__ import annotations

from pydantic import Field

from mol.hcp.base import Model
from mol.hcp.docstrings import DocumentedSchema, field_doc


class Parent(Model):
    """A section."""

    size: int = 1
    """How big it is."""

    plain: str = ""


class Child(Parent):
    """A section extending another."""

    name: str = Field(default="x", description="Given explicitly.")
    """Not used: the explicit description wins."""

    colour: str = Field(default="red", alias="color")
    """Its colour."""


def test_the_schema_describes_fields_by_their_docstrings():
    schema = Child.model_json_schema(schema_generator=DocumentedSchema)
    properties = schema["properties"]
    assert properties["size"]["description"] == "How big it is."  # inherited
    assert properties["name"]["description"] == "Given explicitly."
    assert properties["color"]["description"] == "Its colour."  # by its alias
    assert "description" not in properties["plain"]
    assert schema["description"] == "A section extending another."


def test_models_carry_no_description_until_a_schema_is_made():
    # Reading docstrings at class creation cost a walk of the stack at every start.
    assert Parent.model_fields["size"].description is None
    assert field_doc(Child, "size") == "How big it is."
    assert field_doc(Child, "plain") is None
