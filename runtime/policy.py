"""Tool policy per adapter: allow / ask / deny glob patterns over tool names.

Deny wins over ask, ask over allow; a tool no pattern names is hidden. Hidden
and denied tools are neither shown to the model nor run when called anyway.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Literal

from mol.hcp.schema import AdapterConfig

Decision = Literal["allow", "ask", "deny", "hidden"]

SKILL_TOOLS = ("load_skill", "read_skill_file")
"""Tools implicitly allowed to an adapter that lists skills (progressive disclosure)."""
GENUI_TOOLS = ("render_ui",)
"""Tools implicitly allowed to an adapter whose ``genui`` checks are on with ``tool``."""


def _matches(name: str, patterns: list[str]) -> bool:
    return any(fnmatchcase(name, pattern) for pattern in patterns)


def decide(name: str, adapter: AdapterConfig) -> Decision:
    """What the adapter's policy says about tool ``name``."""
    policy = adapter.tools
    if _matches(name, policy.deny):
        return "deny"
    if _matches(name, policy.ask):
        return "ask"
    if _matches(name, policy.allow):
        return "allow"
    if adapter.skills and name in SKILL_TOOLS:
        return "allow"
    genui = adapter.genui
    if name in GENUI_TOOLS and genui is not None and genui.enabled and genui.tool:
        return "allow"
    return "hidden"


def visible(name: str, adapter: AdapterConfig) -> bool:
    """Whether the model is shown tool ``name``."""
    return decide(name, adapter) in ("allow", "ask")
