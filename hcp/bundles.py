"""Plugin bundles: Claude Code and Codex plugin folders loaded into an HCP artifact.

A bundle is a folder with an optional manifest, ``.claude-plugin/plugin.json``
and/or ``.codex-plugin/plugin.json`` (their documented fields are read,
unknown ones kept), and the default component locations::

    my-plugin/
    ├── .claude-plugin/plugin.json   name, version, description, skills, commands, hooks, mcpServers
    ├── skills/<name>/SKILL.md       Agent Skills
    ├── commands/*.md                slash commands (prompt templates)
    ├── hooks/hooks.json             Claude Code hooks
    └── .mcp.json                    MCP servers

Paths a manifest names add to the defaults. The same file or folder reached
twice (a symbolic link, or a manifest naming a default) is read once. A
bundle's MCP server ``S`` is named as Claude Code names it, ``plugin_<bundle>_S``
(``mol.hcp.claude.plugin_server``), so its tools are ``mcp__plugin_<bundle>_S__<tool>``,
the names the plugin's commands and hooks use. What mol
cannot run (agents, output styles, an unsupported hook event...) is reported
in ``Bundle.notes``; what is wrong (invalid JSON, a literal secret, a missing
hook script) is a problem that fails the load.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mol.hcp import claude
from mol.hcp.files import command_files, resolve
from mol.hcp.sections import HooksConfig, MCPServerConfig

MANIFESTS = (".claude-plugin/plugin.json", ".codex-plugin/plugin.json")
"""Manifest files, in the order they are read."""
NOT_LOADED = ("agents", "outputStyles", "lspServers", "apps", "monitors")
"""Manifest components mol does not load (reported when present)."""
_NAME = re.compile(r"^[A-Za-z0-9]+(?:[-][A-Za-z0-9]+)*$")
_SERVER = re.compile(r"^[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*$")
"""A server name that gives clean tool names (``mcp__<server>__<tool>``, mol.runtime.mcp.naming):
no ``__`` inside and no ``_`` at either end."""


@dataclass
class Bundle:
    """One loaded bundle."""

    name: str
    folder: Path
    """The bundle's folder (absolute)."""
    ref: str
    """The folder as written in ``bundles.paths``."""
    manifests: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Manifest file (relative) -> its fields as parsed, unknown ones included."""
    skill_sources: list[Path] = field(default_factory=list)
    """Folders of skills (or skill folders) the bundle provides."""
    skills: list[str] = field(default_factory=list)
    """Names of its skills."""
    commands: dict[str, Any] = field(default_factory=dict)
    """Name -> ``mol.hcp.slash.SlashCommand``."""
    hooks: HooksConfig = field(default_factory=HooksConfig)
    mcp_servers: dict[str, MCPServerConfig] = field(default_factory=dict)
    """Artifact name (``plugin_<bundle>_<server>``, Claude Code's) -> configuration."""
    notes: list[str] = field(default_factory=list)
    """What was not loaded, and why."""

    def summary(self) -> dict[str, Any]:
        """What the bundle contributes, as JSON (part of the digest and of ``mol hcp diff``)."""
        from mol.hcp.digest import digest_file

        return {"skills": sorted(self.skills), "mcp_servers": sorted(self.mcp_servers),
                "commands": {n: digest_file(c.file) for n, c in sorted(self.commands.items())},
                "hooks": self.hooks.model_dump(mode="json", exclude_defaults=True)}


def load(ref: str, base_dir: Path) -> tuple[Bundle | None, list[str]]:
    """Load the bundle at ``ref`` (relative to ``base_dir``); ``(bundle, problems)``."""
    folder = resolve(base_dir, ref)
    problems: list[str] = []
    manifests = _manifests(folder, problems)
    declared = _declared(folder, manifests, problems)
    name = next((m["name"] for m in manifests.values() if isinstance(m.get("name"), str)),
                folder.name.lstrip("."))
    if not _NAME.match(name):
        problems.append(f"{folder}: bundle name {name!r} must be letters, digits and single "
                        "hyphens (it prefixes the bundle's MCP server names)")
        return None, problems
    bundle = Bundle(name=name, folder=folder, ref=ref, manifests=manifests)
    for file, manifest in manifests.items():
        bundle.notes += [f"{folder / file}: {key}: not loaded (mol has no {key})"
                         for key in NOT_LOADED if key in manifest]
    bundle.skill_sources = _paths(folder, "skills", declared["skills"], problems)
    _load_mcp(bundle, declared["mcpServers"], base_dir, problems)
    _load_commands(bundle, declared["commands"], problems)
    _load_hooks(bundle, declared["hooks"], base_dir, problems)
    return bundle, problems


def _manifests(folder: Path, problems: list[str]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for relative in MANIFESTS:
        data = _json(folder / relative, problems)
        if data is None:
            continue
        if not isinstance(data, dict):
            problems.append(f"{folder / relative}: must be a JSON object")
            continue
        found[relative] = data
    return found


def _json(path: Path, problems: list[str]) -> Any:
    """The parsed JSON file, or None when it is absent (a problem when it is unreadable)."""
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        problems.append(f"{path}: not valid JSON: {exc}")
        return None


def _declared(folder: Path, manifests: dict[str, dict[str, Any]],
              problems: list[str]) -> dict[str, list[Any]]:
    """Each component's manifest entries (paths, or inline objects for hooks and MCP servers),
    over both manifests; a field of the wrong type is a problem."""
    out: dict[str, list[Any]] = {"skills": [], "commands": [], "hooks": [], "mcpServers": []}
    for file, manifest in manifests.items():
        if "name" in manifest and not isinstance(manifest["name"], str):
            problems.append(f"{folder / file}: name: must be a string")
        for key, entries in out.items():
            value = manifest.get(key)
            values = value if isinstance(value, list) else [] if value is None else [value]
            inline = key in ("hooks", "mcpServers")
            if not all(isinstance(v, str) or (inline and isinstance(v, dict)) for v in values):
                kinds = "a path, a list of paths or an object" if inline else "a path or a list"
                problems.append(f"{folder / file}: {key}: must be {kinds}")
                continue
            entries += values
    return out


def _paths(folder: Path, default: str, declared: list[Any], problems: list[str]) -> list[Path]:
    """The default location (when present) and the declared paths, each once (by where it
    resolves); a declared path must exist and, as written, stay inside the bundle."""
    found: list[Path] = []
    entries = [default] + [entry for entry in declared if isinstance(entry, str)]
    for index, entry in enumerate(entries):
        path = folder / entry
        normal = os.path.normpath(entry)
        if index and (os.path.isabs(normal) or normal.split(os.sep)[0] == ".."):
            problems.append(f"{folder}: {entry!r} leads outside the bundle")
        elif not path.exists():
            if index:
                problems.append(f"{folder}: {entry!r} does not exist")
        elif path.resolve() not in [p.resolve() for p in found]:
            found.append(path)
    return found


def _load_mcp(bundle: Bundle, declared: list[Any], base_dir: Path, problems: list[str]) -> None:
    sources: list[tuple[str, Any]] = []
    for path in _paths(bundle.folder, ".mcp.json", declared, problems):
        data = _json(path, problems)
        if data is not None:
            sources.append((str(path), data))
    sources += [(f"{bundle.folder} manifest mcpServers", d) for d in declared if isinstance(d, dict)]
    # The server's folder as the artifact names it (absolute for a "~" path, which the
    # MCP client would not expand).
    root = str(bundle.folder) if bundle.ref.startswith("~") else bundle.ref
    roots = {"CLAUDE_PLUGIN_ROOT": root, "CLAUDE_PROJECT_DIR": "."}
    for where, data in sources:
        entries = claude.mcp_entries(data, where)
        problems += entries.problems
        for server, entry in entries.value.items():
            translated = claude.mcp_server(server, entry, where, root, roots)
            bundle.notes += translated.notes
            problems += translated.problems
            if translated.value is None or translated.problems:
                continue
            name = claude.plugin_server(bundle.name, server)
            if not _SERVER.match(name):
                problems.append(f"{where}: mcpServers.{server}: the name must not hold '__' or "
                                f"end with '_' (its tools would be mcp__{name}__<tool>)")
                continue
            try:
                bundle.mcp_servers[name] = MCPServerConfig.model_validate(translated.value)
            except ValidationError as exc:
                problems += [f"{where}: mcpServers.{server}: {_message(e)}" for e in exc.errors()]


def _load_commands(bundle: Bundle, declared: list[Any], problems: list[str]) -> None:
    from mol.hcp import slash

    files: list[Path] = []
    for path in _paths(bundle.folder, "commands", declared, problems):
        files += sorted(path.rglob("*.md")) if path.is_dir() else [path]
    for file in files:
        parsed = slash.parse(file, bundle.name, bundle.folder)
        bundle.notes += parsed.notes
        problems += parsed.problems
        command = parsed.value
        if command is None:
            continue
        other = bundle.commands.get(command.name)
        if other is not None and other.file.resolve() != file.resolve():
            problems.append(f"{file}: command /{command.name} is defined twice (also in "
                            f"{other.file})")
            continue
        bundle.commands[command.name] = command


def _load_hooks(bundle: Bundle, declared: list[Any], base_dir: Path, problems: list[str]) -> None:
    sources = [(str(path), _json(path, problems))
               for path in _paths(bundle.folder, "hooks/hooks.json", declared, problems)]
    sources += [(f"{bundle.folder} manifest hooks", d) for d in declared if isinstance(d, dict)]
    here = {"CLAUDE_PLUGIN_ROOT": ".",
            "CLAUDE_PROJECT_DIR": os.path.relpath(base_dir.resolve(), bundle.folder)}
    merged: dict[str, list[Any]] = {}
    for where, data in sources:
        if data is None:
            continue
        translated = claude.hooks_config(data, where, here)
        bundle.notes += translated.notes
        problems += translated.problems
        for event, matchers in translated.value.items():
            merged.setdefault(event, []).extend(matchers)
    try:
        bundle.hooks = HooksConfig.model_validate(merged)
    except ValidationError as exc:
        problems += [f"{bundle.folder}: hooks: {_message(e)}" for e in exc.errors()]
        return
    for event in claude.SUPPORTED_EVENTS:
        for matcher in getattr(bundle.hooks, event):
            for hook in matcher.hooks:
                for word in command_files(hook.command):
                    if not (bundle.folder / word).is_file():
                        problems.append(f"{bundle.folder}: hooks.{event}: {hook.command!r} names "
                                        f"{word}, which is not a file of the bundle")


def _message(error: dict[str, Any]) -> str:
    where = ".".join(str(part) for part in error["loc"])
    message = error["msg"].removeprefix("Value error, ")
    return f"{where}: {message}" if where else message
