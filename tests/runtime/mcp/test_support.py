"""Pure helpers of the MCP client: naming, pins, result text, backoff."""

from __future__ import annotations

import base64
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from mol.core.tools import TOOL_NAME
from mol.runtime.mcp.naming import (
    definition_digest,
    filter_tools,
    qualified_name,
    resource_tool_name,
)
from mol.runtime.mcp.results import cap_text, result_text
from mol.runtime.mcp.server import backoff_delay

server_names = st.from_regex(r"[A-Za-z0-9_-]{1,80}", fullmatch=True)
tool_names = st.text(min_size=1, max_size=100)


def test_clean_names_are_kept():
    assert qualified_name("git", "git_status") == "mcp__git__git_status"
    assert qualified_name("my-server", "do-it") == "mcp__my-server__do-it"


def test_names_that_would_be_ambiguous_or_invalid_get_a_hash_suffix():
    for server, tool in [("a__b", "c"), ("a_", "b"), ("s", "has space"), ("s", "x" * 80),
                         ("s", "read_resource"), ("s", "tool_0123456789")]:
        name = qualified_name(server, tool)
        assert TOOL_NAME.match(name), name
        assert name != f"mcp__{server}__{tool}"
    # The two spellings that read the same as clean names stay apart.
    assert qualified_name("a__b", "c") != qualified_name("a", "b__c")
    assert qualified_name("a_", "b") != qualified_name("a", "_b")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(server_names, tool_names), min_size=2, max_size=30, unique=True))
def test_distinct_pairs_get_distinct_valid_names(pairs):
    names = [qualified_name(s, t) for s, t in pairs]
    assert all(TOOL_NAME.match(n) for n in names)
    assert len(set(names)) == len(names)
    readers = {resource_tool_name(s) for s, _ in pairs}
    assert not readers & set(names)


def test_filter_applies_enabled_then_disabled():
    assert filter_tools(["a", "b", "c"], None, []) == {"a", "b", "c"}
    assert filter_tools(["a", "b", "c"], ["a", "b"], ["b"]) == {"a"}


def _tool(description: str, schema: dict) -> SimpleNamespace:
    return SimpleNamespace(name="t", title=None, description=description, input_schema=schema,
                           output_schema=None, annotations=None)


def test_pin_changes_with_description_or_schema_only():
    base = definition_digest(_tool("d", {"type": "object"}))
    assert base == definition_digest(_tool("d", {"type": "object"}))
    assert base != definition_digest(_tool("d2", {"type": "object"}))
    assert base != definition_digest(_tool("d", {"type": "object", "properties": {"x": {}}}))


def test_result_text_describes_non_text_content_and_caps():
    png = SimpleNamespace(type="image", mime_type="image/png",
                          data=base64.b64encode(b"\0" * 1234).decode())
    text = SimpleNamespace(type="text", text="hello")
    link = SimpleNamespace(type="resource_link", uri="file:///a", name="a", mime_type=None)
    assert result_text([text, png, link], None, 1000) == (
        "hello\n[image: image/png, 1234 bytes]\n[resource link: file:///a (a)]")
    assert result_text([], {"x": 1}, 1000) == '{"x": 1}'
    capped = cap_text("a" * 1000 + "z" * 1000, 400)
    assert len(capped) < 500 and "mol dropped 1600 characters" in capped
    assert capped.startswith("a") and capped.endswith("z")


def test_backoff_grows_and_is_bounded():
    assert backoff_delay(1) == 0
    assert [backoff_delay(n) for n in (2, 3, 4)] == [1, 2, 4]
    assert backoff_delay(50) == 30
