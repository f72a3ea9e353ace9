"""Translate Claude Code and Codex configuration into HCP shapes.

Pure functions over parsed JSON/TOML: ``.mcp.json`` entries become
``[mcp_servers]`` tables, hook files (``hooks/hooks.json``, the ``hooks`` of
``settings.json``) become ``[hooks]`` matchers, and Claude Code tool names
(``Bash``, ``Read``...) become mol's. Each function returns what it mapped
together with ``Translation.notes`` (what was not mapped, and why) and
``Translation.problems`` (what must be fixed: a literal secret, say), so that
nothing is ever dropped silently.

Paths: a translated command runs in its *root* (a bundle's folder, or the
project a configuration came from), written relative to the artifact as
``root``. ``${CLAUDE_PLUGIN_ROOT}`` and ``$CLAUDE_PROJECT_DIR`` become paths
relative to where the command runs.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from mol.hcp.sections import HooksConfig

SUPPORTED_EVENTS = tuple(HooksConfig.model_fields)
"""Claude Code hook events mol runs: the events of ``[hooks]`` (docs/hooks.md says how each
maps), read from the schema so that the two never differ."""

CLAUDE_TOOLS = {"Bash": "terminal", "Read": "read_file", "Write": "write_file",
                "Edit": "edit_file", "MultiEdit": "edit_file", "LS": "list_dir"}
"""Claude Code tool names and the mol tools that do the same job."""

HOOK_TIMEOUT_SEC = 600.0
"""Claude Code's default timeout of a command hook, kept by the translation."""

ROOT_VARIABLES = ("CLAUDE_PLUGIN_ROOT", "CLAUDE_PROJECT_DIR")
"""Variables naming a command's root folder; replaced by a path, since no shell runs."""

_SECRET_NAME = re.compile(r"(?i)(token|secret|passw|api[_-]?key|auth|credential|cookie|"
                          r"private[_-]?key|access[_-]?key|session)")
_REFERENCE = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}$")
_ANY_REFERENCE = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*")
_BEARER = re.compile(r"^Bearer\s+\$\{([A-Za-z_][A-Za-z0-9_]*)\}$", re.IGNORECASE)
_SHELL_SYNTAX = re.compile(r"[|&;<>()`$*?\[\]~{}]")
_KINDS = {str: "string", list: "list", dict: "JSON object"}
_NOT_KEY = re.compile(r"[^A-Za-z0-9_-]")


@dataclass
class Translation:
    """What a translation produced, what it left out (``notes``) and what it refused."""

    value: Any = None
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def is_secret_name(name: str) -> bool:
    """Whether a variable or header name looks like it carries a credential."""
    return bool(_SECRET_NAME.search(name))


def server_key(name: str) -> str:
    """An MCP server's name as Claude Code puts it in tool names (``mcp__<key>__<tool>``):
    every character outside ``[A-Za-z0-9_-]`` becomes ``_``."""
    return _NOT_KEY.sub("_", name)


def plugin_server(plugin: str, server: str) -> str:
    """The name Claude Code gives MCP server ``server`` of plugin ``plugin``: it registers
    it as ``plugin:<plugin>:<server>``, so the tools are
    ``mcp__plugin_<plugin>_<server>__<tool>`` (``mcp__plugin_slack_slack__slack_read_channel``),
    the names plugins write in ``allowed-tools`` and hook matchers."""
    return server_key(f"plugin:{plugin}:{server}")


def replace_roots(text: str, roots: dict[str, str]) -> str:
    """``text`` with ``${VAR}`` / ``$VAR`` of each variable in ``roots`` replaced by its path."""
    for name, path in roots.items():
        text = re.sub(r"\$\{" + name + r"\}|\$" + name + r"\b", lambda _m, p=path: p, text)
    return text


# -- MCP servers ---------------------------------------------------------------------------

def mcp_entries(data: Any, where: str) -> Translation:
    """The server entries of a ``.mcp.json`` (``{"mcpServers": {...}}`` or the bare map)."""
    out = Translation(value={})
    if not isinstance(data, dict):
        out.problems.append(f"{where}: must be a JSON object of MCP servers")
        return out
    servers = data.get("mcpServers", data)
    if not isinstance(servers, dict) or not all(isinstance(v, dict) for v in servers.values()):
        out.problems.append(f"{where}: mcpServers must map server names to objects")
        return out
    out.value = dict(servers)
    return out


def mcp_server(name: str, entry: dict[str, Any], where: str, root: str,
               roots: dict[str, str]) -> Translation:
    """An ``.mcp.json`` / ``mcpServers`` entry as ``MCPServerConfig`` fields.

    A stdio server runs in ``root`` (plus the entry's own ``cwd``); ``roots`` maps
    variables such as ``CLAUDE_PLUGIN_ROOT`` to folders, all relative to the
    artifact. ``${VAR}`` references in ``env`` and ``headers`` become
    ``env_vars`` / ``env_from`` / ``env_http_headers`` / ``bearer_token_env_var``;
    a literal credential is a problem naming the key.
    """
    out = Translation(value={})
    where = f"{where}: mcpServers.{name}"
    kind = entry.get("type", "http" if "url" in entry else "stdio")
    if kind not in ("stdio", "http", "streamable-http"):
        out.notes.append(f"{where}: type {kind!r} is not supported (mol speaks stdio and "
                         "streamable HTTP); the server is left out")
        out.value = None
        return out
    config: dict[str, Any] = out.value
    for key, kind in (("command", str), ("url", str), ("cwd", str), ("args", list),
                      ("env", dict), ("headers", dict)):
        if key in entry and not isinstance(entry[key], kind):
            out.problems.append(f"{where}.{key}: must be a {_KINDS[kind]}")
    if out.problems:
        return out
    cwd = os.path.normpath(os.path.join(root, str(entry.get("cwd") or ".")))
    here = {var: os.path.relpath(path, cwd) for var, path in roots.items()}
    for key, value in entry.items():
        if key == "command":
            command = replace_roots(value, roots)
            if command == value and "/" in command and not os.path.isabs(command):
                command = _as_path(os.path.join(root, command))
            config["command"], config["cwd"] = command, cwd
            _no_variables(out, f"{where}.command", command)
        elif key == "args":
            config["args"] = [replace_roots(str(a), here) for a in value]
            for index, arg in enumerate(config["args"]):
                _no_variables(out, f"{where}.args[{index}]", arg)
        elif key == "env":
            _env(out, config, value, where, here)
        elif key == "url":
            config["url"] = value
            _no_variables(out, f"{where}.url", value)
        elif key == "headers":
            _headers(out, config, value, where)
        elif key not in ("type", "cwd"):
            out.notes.append(f"{where}.{key}: not mapped (mol's MCP servers have no such field)")
    return out


def _as_path(path: str) -> str:
    """A relative path that still reads as a path (``./x``, not ``x``) once normalized."""
    path = os.path.normpath(path)
    return path if "/" in path or os.path.isabs(path) else "./" + path


def _no_variables(out: Translation, where: str, text: str) -> None:
    if _ANY_REFERENCE.search(text):
        out.problems.append(f"{where}: {text!r} refers to an environment variable, which mol "
                            "does not expand here; pass it to the server through env")


def _env(out: Translation, config: dict[str, Any], env: dict[str, Any], where: str,
         here: dict[str, str]) -> None:
    for key, raw in env.items():
        value = replace_roots(str(raw), here)
        reference = _REFERENCE.match(value)
        if reference:
            variable, default = reference.groups()
            if variable == key:
                config.setdefault("env_vars", []).append(key)
            else:
                config.setdefault("env_from", {})[key] = variable
            if default is not None:
                out.notes.append(f"{where}.env.{key}: the default {default!r} is not kept (mol "
                                 f"leaves {key} out when {variable} is unset)")
        elif _ANY_REFERENCE.search(value):
            out.problems.append(f"{where}.env.{key}: {value!r} mixes text and variables; mol "
                                "passes variables whole: write it as ${VAR}")
        elif is_secret_name(key):
            out.problems.append(f"{where}.env.{key}: a literal value for what looks like a "
                                f"secret; write it as \"${{{key}}}\" and set {key} in mol's "
                                "environment")
        else:
            config.setdefault("env", {})[key] = value


def _headers(out: Translation, config: dict[str, Any], headers: dict[str, Any],
             where: str) -> None:
    for header, raw in headers.items():
        value = str(raw)
        bearer, reference = _BEARER.match(value), _REFERENCE.match(value)
        if bearer and header.lower() == "authorization":
            config["bearer_token_env_var"] = bearer.group(1)
        elif reference and reference.group(2) is None:
            config.setdefault("env_http_headers", {})[header] = reference.group(1)
        elif _ANY_REFERENCE.search(value):
            out.problems.append(f"{where}.headers.{header}: {value!r} mixes text and "
                                "variables; write it as ${VAR} (or 'Bearer ${VAR}' for "
                                "Authorization)")
        elif header.lower() in ("authorization", "proxy-authorization") or is_secret_name(header):
            out.problems.append(f"{where}.headers.{header}: a literal credential; write it as "
                                "${VAR} (or 'Bearer ${VAR}') and set VAR in mol's environment")
        else:
            config.setdefault("http_headers", {})[header] = value


# -- hooks ---------------------------------------------------------------------------------

def hooks_config(data: Any, where: str, here: dict[str, str]) -> Translation:
    """A Claude Code hooks object (``{"hooks": {...}}`` or the bare event map) as
    ``HooksConfig`` fields; ``here`` maps root variables to paths from the hooks' folder."""
    out = Translation(value={})
    events = data.get("hooks", data) if isinstance(data, dict) else None
    if not isinstance(events, dict):
        out.problems.append(f"{where}: hooks must be a JSON object of events")
        return out
    for event, matchers in events.items():
        if event == "description" and isinstance(matchers, str):
            continue
        if not isinstance(matchers, list):
            out.problems.append(f"{where}: hooks.{event}: must be a list of matchers")
            continue
        count = sum(len(m["hooks"]) for m in matchers
                    if isinstance(m, dict) and isinstance(m.get("hooks"), list))
        if event not in SUPPORTED_EVENTS:
            out.notes.append(f"{where}: hooks.{event}: event not supported by mol; its {count} "
                             f"hook(s) will not run (supported: {', '.join(SUPPORTED_EVENTS)})")
            continue
        translated = [_matcher(out, m, f"{where}: hooks.{event}[{i}]", here)
                      for i, m in enumerate(matchers)]
        kept = [m for m in translated if m is not None]
        if kept:
            out.value[event] = kept
    return out


def _matcher(out: Translation, matcher: Any, where: str,
             here: dict[str, str]) -> dict[str, Any] | None:
    if not isinstance(matcher, dict) or not isinstance(matcher.get("hooks"), list):
        out.problems.append(f"{where}: must be an object with a list of hooks")
        return None
    hooks = []
    for index, hook in enumerate(matcher["hooks"]):
        spot = f"{where}.hooks[{index}]"
        kind = hook.get("type") if isinstance(hook, dict) else None
        if kind != "command" or not isinstance(hook.get("command"), str):
            out.notes.append(f"{spot}: hook type {kind!r} is not supported (mol runs command "
                             "hooks only); it will not run")
            continue
        timeout = hook.get("timeout", HOOK_TIMEOUT_SEC)
        hooks.append({"type": "command", "command": hook_command(hook["command"], here),
                      "timeout": timeout, "on_error": "allow"})
        for key in hook:
            if key not in ("type", "command", "timeout"):
                out.notes.append(f"{spot}.{key}: not mapped (mol runs every hook to its end, "
                                 "in order)")
    if not hooks:
        return None
    return {"matcher": tool_matcher(str(matcher.get("matcher") or "*"), out, where),
            "hooks": hooks}


def hook_command(command: str, here: dict[str, str]) -> str:
    """A Claude Code hook command as mol runs it: root variables replaced by paths, and
    wrapped in ``sh -c`` when it uses shell syntax (mol runs no shell of its own)."""
    command = replace_roots(command, here)
    try:
        words = shlex.split(command)
    except ValueError:
        words = None
    if words is None or _SHELL_SYNTAX.search(command.replace('"', "").replace("'", "")):
        return shlex.join(["sh", "-c", command])
    return shlex.join(words)


def tool_matcher(matcher: str, out: Translation | None = None, where: str = "") -> str:
    """A Claude Code matcher (exact names, ``|`` alternatives or a regular expression) as a
    mol glob over mol's tool names."""
    if matcher in ("", "*"):
        return "*"
    parts = []
    for alternative in matcher.split("|"):
        glob = alternative.strip().replace(".*", "*").replace(".+", "?*")
        if re.search(r"[\\^$()\[\]{}+]", glob) and out is not None:
            out.notes.append(f"{where}: matcher {alternative!r} is a regular expression mol "
                             "reads as a glob; check that it still selects the right tools")
        parts.append(tool_name(glob))
    return "|".join(parts)


def tool_name(name: str) -> str:
    """mol's name for a Claude Code tool (``Bash`` -> ``terminal``); others unchanged."""
    return CLAUDE_TOOLS.get(name, name)


def allowed_tools(entries: list[str], where: str) -> Translation:
    """Claude Code permission entries (``Bash(git:*)``, ``Read``, ``mcp__srv__tool``) as mol
    tool-name patterns. MCP names pass unchanged (a plugin's own tools are
    ``mcp__plugin_<plugin>_<server>__<tool>`` in both); ``mcp__srv``, Claude Code's rule for
    every tool of a server, is ``mcp__srv__*``."""
    out = Translation(value=[])
    for entry in entries:
        name, _, specifier = entry.partition("(")
        name = tool_name(name.strip())
        if specifier:
            out.notes.append(f"{where}: {entry!r}: mol's policy is over tool names, so it "
                             f"allows all of {name}")
        if name.startswith("mcp__") and "__" not in name[len("mcp__"):]:
            name += "__*"
        if name and name not in out.value:
            out.value.append(name)
    return out
