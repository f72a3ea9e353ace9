"""Field docstrings as the HCP JSON Schema's descriptions, read only when a schema is made.

Every HCP field is documented by the string literal right after it (``name: type =
default``, then the string on the next line). pydantic's ``use_attribute_docstrings`` reads those at
class creation, through a walk of the stack that costs about half a second at every start
(more while litellm imports in the background), although only ``mol hcp schema`` uses
them. Here each module's source is parsed once, when a schema is generated.
"""

from __future__ import annotations

import ast
import inspect
import sys
from functools import cache
from typing import Any

from pydantic.json_schema import GenerateJsonSchema


class DocumentedSchema(GenerateJsonSchema):
    """pydantic's JSON Schema generator, with each model field's docstring as its
    ``description`` unless the field gives one itself."""

    def model_schema(self, schema: Any) -> Any:
        json_schema = super().model_schema(schema)
        cls = schema["cls"]
        properties = json_schema.get("properties", {})
        for name, field in cls.model_fields.items():
            key = field.alias or name
            doc = field_doc(cls, name)
            if doc and field.description is None and key in properties:
                properties[key].setdefault("description", doc)
        return json_schema


def field_doc(cls: type, name: str) -> str | None:
    """The docstring of field ``name`` of ``cls``, from the class that declares it."""
    for klass in cls.__mro__:
        docs = _class_docs(klass.__module__, klass.__qualname__)
        if name in docs:
            return docs[name]
        if name in getattr(klass, "__annotations__", {}):
            return None  # declared here without a docstring
    return None


@cache
def _class_docs(module: str, qualname: str) -> dict[str, str]:
    node = _classes(module).get(qualname)
    if node is None:
        return {}
    docs = {}
    for field, after in zip(node.body, node.body[1:], strict=False):
        if (isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name)
                and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)):
            docs[field.target.id] = inspect.cleandoc(after.value.value)
    return docs


@cache
def _classes(module: str) -> dict[str, ast.ClassDef]:
    """The module's class definitions by qualified name (top level and nested)."""
    path = getattr(sys.modules.get(module), "__file__", None)
    if not path or not path.endswith(".py"):
        return {}
    with open(path, encoding="utf-8") as source:
        tree = ast.parse(source.read())
    found: dict[str, ast.ClassDef] = {}

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                found[prefix + node.name] = node
                walk(node.body, f"{prefix}{node.name}.")

    walk(tree.body, "")
    return found
