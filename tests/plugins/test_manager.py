"""Plugin loading: registration, collisions, all-or-nothing, strict mode, the load list."""

import pytest

from mol.core.errors import PluginError
from mol.core.tools import ToolContext, function_tool, run_tool
from mol.plugins import hookimpl
from mol.plugins.manager import PluginManager

pytestmark = pytest.mark.anyio


class One:
    @hookimpl
    def mol_register_tools(self, register):
        def greet(name: str) -> str:
            """Greet someone."""
            return f"hello {name}"

        register(greet)


class Clash:
    @hookimpl
    def mol_register_tools(self, register):
        def other(x: int) -> int:
            """Another tool, registered before the clash."""
            return x

        def greet(name: str) -> str:
            """Greet again."""
            return name

        register(other)
        register(greet)


class Misspelled:
    @hookimpl
    def mol_register_tool(self, register):  # not a hook of mol
        pass


def test_tools_are_registered_with_their_owner():
    manager = PluginManager(None, builtin=(), extra=[("one", One())])
    assert manager.loaded == ["one"] and manager.owner("greet") == "one"
    assert manager.tools["greet"].source == "plugin:one"


def test_a_name_clash_names_both_plugins_and_registers_nothing_of_the_loser():
    manager = PluginManager(None, builtin=(), extra=[("one", One()), ("clash", Clash())])
    assert [f.name for f in manager.failures] == ["clash"]
    assert "registered by both plugin 'one' and plugin 'clash'" in manager.failures[0].error
    assert set(manager.tools) == {"greet"}  # `other` was rolled back with the plugin


def test_a_misspelled_hook_is_reported():
    manager = PluginManager(None, builtin=(), extra=[("typo", Misspelled())])
    assert manager.failures and "mol_register_tool" in manager.failures[0].error


def test_strict_mode_raises():
    with pytest.raises(PluginError, match="plugin 'clash' failed"):
        PluginManager(None, builtin=(), strict=True, extra=[("one", One()), ("clash", Clash())])


def test_a_load_list_naming_a_missing_plugin_is_reported():
    manager = PluginManager(["nope"], builtin=())
    assert [str(f) for f in manager.failures] == [
        "plugin 'nope' failed: no installed plugin has this entry-point name"]


def test_builtin_plugins_load():
    manager = PluginManager([])
    assert manager.failures == []
    assert set(manager.loaded) == {"mol.plugins.builtin.sandbox", "mol.plugins.builtin.skills"}


async def test_function_tools_validate_and_inject_context():
    def where(path: str, context: ToolContext, depth: int = 2) -> str:
        """Say where a path is.

        Args:
            path: a path
            depth: how deep
        """
        return f"{context.adapter}:{path}:{depth}"

    tool = function_tool(where)
    assert tool.parameters["required"] == ["path"]
    assert tool.parameters["properties"]["depth"] == {
        "default": 2, "description": "how deep", "type": "integer"}
    assert "context" not in tool.parameters["properties"]
    ok = await run_tool(tool, '{"path": "a"}', ToolContext(adapter="L2"))
    assert ok.content == "L2:a:2" and not ok.is_error
    bad = await run_tool(tool, '{"path": 3, "extra": 1}', ToolContext(adapter="L2"))
    assert bad.is_error and "path:" in bad.content and "extra: unknown argument" in bad.content
    not_object = await run_tool(tool, "[1]", ToolContext(adapter="L2"))
    assert not_object.content == "Error: arguments must be a JSON object, got list"
