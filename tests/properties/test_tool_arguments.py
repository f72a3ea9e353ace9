"""Properties of tool-argument checks (issue 35), with ``hypothesis-jsonschema``: for the
built-in tools (typed functions, checked by pydantic) and hand-written JSON Schemas
(checked by ``mol.core.schemas``), every argument object the schema allows runs the tool,
and every one it refuses is refused by ``run_tool`` before the tool's body runs, as an
error result the model reads."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from typing import Any

import anyio
import pytest
from hypothesis import given, note
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema
from jsonschema import Draft202012Validator

from mol.core.tools import Tool, ToolContext, run_tool
from mol.plugins.manager import PluginManager

from .conftest import bounded

BUILTIN = PluginManager(load=[]).tools
HAND = {
    "enum_and_bounds": {"type": "object", "additionalProperties": False,
                        "required": ["mode", "count"],
                        "properties": {"mode": {"enum": ["fast", "slow"]},
                                       "count": {"type": "integer", "minimum": 1,
                                                 "maximum": 10},
                                       "ratio": {"type": "number", "exclusiveMinimum": 0}}},
    "nested": {"type": "object", "required": ["target"], "properties": {
        "target": {"type": "object", "required": ["path"], "additionalProperties": False,
                   "properties": {"path": {"type": "string", "minLength": 1},
                                  "lines": {"type": "array", "maxItems": 3,
                                            "items": {"type": "integer"}}}},
        "tags": {"type": "array", "uniqueItems": True, "items": {"type": "string"}}}},
    "pattern_and_ref": {"type": "object", "$defs": {"id": {"type": "string",
                                                           "pattern": "^[a-z]{2,5}$"}},
                        "properties": {"id": {"$ref": "#/$defs/id"},
                                       "ids": {"type": "array", "items": {"$ref": "#/$defs/id"}},
                                       "flag": {"type": "boolean"}},
                        "required": ["id"]},
    "one_of": {"type": "object", "properties": {"value": {"oneOf": [
        {"type": "string", "maxLength": 3}, {"type": "integer", "multipleOf": 2}]}},
        "required": ["value"]},
    "nullable_optional": {"type": "object", "properties": {
        "when": {"type": ["string", "null"]}, "limit": {"type": "integer"}}},
}
COERCIBLE = st.sampled_from(["5", "1.5", "true", "false", "null", 1, 0, 2.0, True, False, None])
"""Values of the wrong JSON type that a lax validator turns into the right one."""
json_values = COERCIBLE | st.recursive(
    st.none() | st.booleans() | st.integers(-5, 20) | st.floats(-5, 20, allow_nan=False)
    | st.text(max_size=6) | st.sampled_from(["fast", "ab", "abcdef", "5", "true", ""]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=3), max_leaves=5)


def recording(tool: Tool) -> tuple[Tool, list[dict[str, Any]]]:
    """``tool`` with a body that records what it was called with instead of running."""
    calls: list[dict[str, Any]] = []

    async def body(arguments: dict[str, Any], context: ToolContext) -> str:
        calls.append(arguments)
        return "ran"

    return replace(tool, call=body), calls


def hand_tool(name: str) -> Tool:
    async def never(arguments: dict[str, Any], context: ToolContext) -> str:
        raise AssertionError("replaced by recording()")

    return Tool(name=name, description=name, parameters=HAND[name], call=never, source="test")


TOOLS = {**{f"builtin:{n}": t for n, t in sorted(BUILTIN.items())},
         **{f"hand:{n}": hand_tool(n) for n in HAND}}


def normalized(tool: Tool, arguments: dict[str, Any]) -> dict[str, Any]:
    """``arguments`` as a schema-checked tool gets them: ``mol.core.schemas`` drops the
    null optionals whose schema refuses null (models send them; documented there)."""
    schema = tool.parameters
    if tool.validate is not None:
        return arguments
    validator = Draft202012Validator(schema)
    required = set(schema.get("required", []))
    return {k: v for k, v in arguments.items() if not (
        v is None and k not in required
        and not validator.evolve(schema=schema["properties"].get(k, {})).is_valid(None))}


def allowed(tool: Tool, arguments: dict[str, Any]) -> bool:
    """Whether the schema allows ``arguments`` (as normalized)."""
    return Draft202012Validator(tool.parameters).is_valid(normalized(tool, arguments))


def body_got(tool: Tool, arguments: dict[str, Any], calls: list[dict[str, Any]]) -> None:
    """The body ran once; a schema-checked tool's with exactly the normalized arguments."""
    assert len(calls) == 1
    if tool.validate is None:
        assert calls[0] == normalized(tool, arguments)


def run(tool: Tool, arguments: Any) -> tuple[bool, list[dict[str, Any]], str]:
    recorded, calls = recording(tool)
    result = anyio.run(run_tool, recorded, copy.deepcopy(arguments), ToolContext(adapter="L1"))
    return not result.is_error, calls, result.content


def test_every_builtin_tool_is_covered():
    assert {"terminal", "read_file", "write_file", "edit_file", "list_dir", "load_skill",
            "read_skill_file"} <= set(BUILTIN)


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_every_allowed_argument_object_runs_the_tool(name):
    tool = TOOLS[name]

    @bounded(40)
    @given(arguments=from_schema(tool.parameters))
    def check(arguments):
        ran, calls, content = run(tool, arguments)
        assert ran, f"{name} refused allowed arguments {arguments!r}: {content}"
        body_got(tool, arguments, calls)

    check()


@st.composite
def damaged(draw: st.DrawFn, schema: dict[str, Any]) -> dict[str, Any]:
    """An allowed argument object, then a required key dropped, an unknown key added, or a
    value replaced (at the top or one level down) by any JSON value."""
    arguments = draw(from_schema(schema))
    for _ in range(draw(st.integers(1, 2))):
        how = draw(st.sampled_from(["drop", "add", "replace", "replace", "deep"]))
        keys = sorted(arguments)
        if how == "drop" and keys:
            del arguments[draw(st.sampled_from(keys))]
        elif how == "add" or not keys:
            arguments[draw(st.text(max_size=5))] = draw(json_values)
        elif how == "replace":
            arguments[draw(st.sampled_from(keys))] = draw(json_values)
        else:
            key = draw(st.sampled_from(keys))
            inner = arguments[key]
            if isinstance(inner, dict) and inner:
                inner[draw(st.sampled_from(sorted(inner)))] = draw(json_values)
            elif isinstance(inner, list) and inner:
                inner[draw(st.integers(0, len(inner) - 1))] = draw(json_values)
    return arguments


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_arguments_run_the_tool_exactly_when_the_schema_allows_them(name):
    tool = TOOLS[name]

    @bounded(60)
    @given(arguments=damaged(tool.parameters))
    def check(arguments):
        expected = allowed(tool, arguments)
        note(f"allowed by the schema: {expected}; {json.dumps(arguments)}")
        ran, calls, content = run(tool, arguments)
        if expected:
            assert ran, f"{name} refused {arguments!r}: {content}"
            body_got(tool, arguments, calls)
        else:
            assert not ran and calls == [], f"{name} ran with {arguments!r}"
            assert content.startswith("Error: ") and "invalid arguments" in content, content

    check()


def test_a_typed_tool_takes_no_string_for_a_number_nor_a_boolean():
    """Found by the property above: pydantic's lax mode ran terminal with timeout "5"."""
    for name, arguments in [("builtin:terminal", {"command": "ls", "timeout": "5"}),
                            ("builtin:read_skill_file", {"skill": "s", "path": "p",
                                                         "to_workspace": "true"})]:
        ran, calls, content = run(TOOLS[name], arguments)
        assert (ran, calls) == (False, []) and "invalid arguments" in content, content
    assert run(TOOLS["builtin:terminal"], {"command": "ls", "timeout": 5})[0]  # int for float
