"""Tool-name patterns that can select no tool of the artifact, reported as warnings at load.

A pattern that selects nothing is almost always a naming mistake: a plugin's MCP tool
written as ``mcp__<server>__<tool>`` where Claude Code (and mol) name it
``mcp__plugin_<plugin>_<server>__<tool>``, a server the adapter does not use, or Claude
Code's ``Bash`` in a policy mol reads by its own tool names. The artifact knows its MCP
servers but not their tools (servers list them when they start), so an ``mcp__`` pattern is
judged by its server part; any other pattern is judged only when it is one of Claude
Code's built-in tool names (``mol.hcp.claude.CLAUDE_TOOLS``), which no mol tool carries.

Checked: the adapters' ``tools`` policies (``allow``, ``ask``, ``deny``), the slash
commands' ``allowed-tools`` and the tool-call hook matchers (``PreToolUse``,
``PostToolUse``), the artifact's and its bundles'.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from fnmatch import fnmatchcase
from typing import Any

from mol.hcp.claude import CLAUDE_TOOLS

TOOL_EVENTS = ("PreToolUse", "PostToolUse")
"""Hook events whose matcher is a tool name."""
_GLOB = frozenset("*?[")


def why_unmatched(pattern: str, servers: Iterable[str]) -> str | None:
    """Why ``pattern`` selects no tool of an adapter whose MCP servers are ``servers``, or
    None when it may select one (or cannot be judged before the tools are known)."""
    servers = sorted(servers)
    if pattern in CLAUDE_TOOLS:
        return f"{pattern} is Claude Code's name; mol's tool is {CLAUDE_TOOLS[pattern]}"
    if not pattern.startswith("mcp__"):
        return None
    rest = pattern[len("mcp__"):]
    server, separator, _ = rest.partition("__")
    if not separator and _GLOB.isdisjoint(rest):
        return (f"no tool is named {pattern}: the tools of MCP server {rest!r} are "
                f"mcp__{rest}__<tool> (or mcp__{rest}__* for all of them)")
    if separator and _GLOB.isdisjoint(server):
        if server in servers:
            return None
        have = f"its MCP servers are {', '.join(servers)}" if servers else "it has no MCP servers"
        return (f"it names MCP server {server!r}, which it does not use ({have})"
                f"{_hint(server, servers)}")
    # A glob over servers (``mcp__*``, ``mcp__git*__*``) is a rule about whatever servers
    # there are: it is a mistake only when there are some and it selects none of them.
    target = server if separator else rest
    probe = "{}" if separator else "{}__x"
    if not servers or any(fnmatchcase(probe.format(name), target) for name in servers):
        return None
    return f"it selects none of the MCP servers it uses ({', '.join(servers)})"


def _hint(server: str, servers: list[str]) -> str:
    """A server the pattern probably meant: a plugin's server of that name (Claude Code's
    ``plugin_<plugin>_<server>``), else a close spelling."""
    plugin = [name for name in servers if name.startswith("plugin_") and name.endswith(f"_{server}")]
    close = plugin or difflib.get_close_matches(server, servers, n=1, cutoff=0.6)
    if not close:
        return ""
    return (f"; did you mean mcp__{close[0]}__...? (Claude Code names a plugin's tools "
            "mcp__plugin_<plugin>_<server>__<tool>)" if plugin else
            f"; did you mean mcp__{close[0]}__...?")


def warnings(doc: Any, bundles: dict[str, Any], commands: dict[str, Any]) -> list[str]:
    """One warning per pattern of the artifact that selects no tool, naming where it is."""
    from mol.hcp.expand import adapter_configs, bundle_users

    adapters = adapter_configs(doc)
    servers = {name: set(config.mcp_servers) for name, config in adapters.items()}
    found: list[str] = []

    def check(where: str, patterns: Iterable[str], names: set[str]) -> None:
        for pattern in patterns:
            why = why_unmatched(pattern, names)
            if why:
                found.append(f"{where}: {pattern!r} selects no tool: {why}")

    for adapter, config in adapters.items():
        for kind in ("allow", "ask", "deny"):
            check(f"adapters.{adapter}.tools.{kind}", getattr(config.tools, kind),
                  servers[adapter])
    users = bundle_users(doc)
    every = set(doc.mcp_servers)
    for event in TOOL_EVENTS:
        for index, matcher in enumerate(getattr(doc.hooks, event)):
            check(f"hooks.{event}[{index}].matcher", matcher.globs(), every)
    for name, bundle in bundles.items():
        reach = set().union(*(servers[a] for a in users.get(name, []))) if name in users else every
        for event in TOOL_EVENTS:
            for index, matcher in enumerate(getattr(bundle.hooks, event)):
                check(f"bundle {name}: hooks.{event}[{index}].matcher",
                      matcher.globs(), reach)
    for key, command in sorted(commands.items()):
        if key == command.qualified:  # each command once, under its unambiguous name
            reach = set().union(*(servers[a] for a in users.get(command.bundle, [])))
            check(f"command /{key} allowed-tools", command.allowed_tools, reach)
    return found

