"""Load plugins and collect what they register.

Built-in plugins (``BUILTIN``) load first, the same way third-party ones do.
Third-party plugins are the entry points of group ``mol``; the HCP's
``[plugins] load`` list pins that set when present. A plugin that fails to
import or register is reported with its name and the error and skipped;
``MOL_STRICT_PLUGINS=1`` makes that fatal.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from importlib.metadata import entry_points
from typing import Any

import pluggy

from mol.core.errors import PluginError, ToolError
from mol.core.tools import Tool, function_tool
from mol.plugins import hookspecs

BUILTIN = ("mol.plugins.builtin.sandbox", "mol.plugins.builtin.skills")
"""Modules of the built-in plugins (terminal and file tools, skill tools)."""

ENTRY_POINT_GROUP = "mol"


@dataclass(frozen=True)
class PluginFailure:
    """A plugin that could not be loaded or could not register."""

    name: str
    error: str

    def __str__(self) -> str:
        return f"plugin {self.name!r} failed: {self.error}"


def _strict_default() -> bool:
    return os.environ.get("MOL_STRICT_PLUGINS", "") not in ("", "0", "false")


class PluginManager:
    """The plugins of one runtime, and the tools they registered."""

    def __init__(self, load: list[str] | None = None, *, strict: bool | None = None,
                 builtin: Iterable[str] = BUILTIN, extra: Iterable[tuple[str, Any]] = ()) -> None:
        self.strict = _strict_default() if strict is None else strict
        self.pm = pluggy.PluginManager("mol")
        self.pm.add_hookspecs(hookspecs)
        self.failures: list[PluginFailure] = []
        self.loaded: list[str] = []
        self.tools: dict[str, Tool] = {}
        self._owner: dict[str, str] = {}
        for module in builtin:
            self._load(module, lambda m=module: importlib.import_module(m))
        selected = None if load is None else set(load)
        for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            if selected is None or ep.name in selected:
                self._load(ep.name, ep.load)
        for name in sorted((selected or set()) - {ep.name for ep in
                                                    entry_points(group=ENTRY_POINT_GROUP)}):
            self._fail(name, "no installed plugin has this entry-point name")
        for name, plugin in extra:
            self._load(name, lambda p=plugin: p)

    @classmethod
    def for_artifact(cls, artifact: Any) -> PluginManager:
        """The default plugins of a runtime: the built-ins, and the installed plugins the
        artifact's ``[plugins] load`` selects (all of them when unset)."""
        return cls(artifact.doc.plugins.load)

    def _fail(self, name: str, error: str) -> None:
        failure = PluginFailure(name, error)
        if self.strict:
            raise PluginError(f"{failure} (MOL_STRICT_PLUGINS is set)")
        self.failures.append(failure)

    def _load(self, name: str, obtain: Callable[[], Any]) -> None:
        try:
            plugin = obtain()
            self.pm.register(plugin, name=name)
        except Exception as exc:
            self._fail(name, f"{type(exc).__name__}: {exc}")
            return
        before, owners = dict(self.tools), dict(self._owner)
        try:
            self.pm.check_pending()
            hook = getattr(plugin, "mol_register_tools", None)
            if hook is not None:
                owner = name

                def register(tool: Any, name: str | None = None) -> None:
                    self.add_tool(tool, owner=owner, name=name)

                hook(register=register)
        except Exception as exc:
            # A plugin registers all its tools or none.
            self.tools, self._owner = before, owners
            self.pm.unregister(name=name)
            self._fail(name, f"{type(exc).__name__}: {exc}")
            return
        self.loaded.append(name)

    def add_tool(self, tool: Any, *, owner: str, name: str | None = None) -> Tool:
        """Register a ``Tool`` or a typed function under ``owner``."""
        if not isinstance(tool, Tool):
            if not callable(tool):
                raise ToolError(f"register() takes a Tool or a function, not {type(tool).__name__}")
            tool = function_tool(tool, name=name, source=f"plugin:{owner}")
        elif name:
            tool = replace(tool, name=name)
        if tool.name in self.tools:
            raise ToolError(f"tool {tool.name!r} is registered by both plugin "
                            f"{self._owner[tool.name]!r} and plugin {owner!r}")
        self.tools[tool.name] = tool
        self._owner[tool.name] = owner
        return tool

    def owner(self, tool_name: str) -> str | None:
        """The plugin that registered a tool."""
        return self._owner.get(tool_name)

    @property
    def hook(self) -> Any:
        """The pluggy hook relay (``manager.hook.mol_before_tool_call(...)``)."""
        return self.pm.hook
