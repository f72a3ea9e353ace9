"""``mol hcp import``: a new HCP artifact from a Claude Code project or a Codex config.

The new artifact starts from a base artifact (by default mol's ``venti``
example, with its prompts written inline so the result stands alone) and
gains what the source configures:

- Claude Code (a project folder): ``.mcp.json`` servers, the hooks of
  ``.claude/settings.json`` and ``.claude/settings.local.json``, and
  ``.claude/skills`` + ``.claude/commands`` (the ``.claude`` folder becomes a
  bundle named ``claude``);
- Codex (a ``config.toml``): ``[mcp_servers]``, the ``[features]`` mol can map
  (the shell and patch tools), and the ``skills`` folder next to the file.

What it brings goes to the adapters that use tools in the base (those with a
``tools.allow``). Everything else is reported as not mapped, with the reason.
The result is validated like any artifact before it is returned.
"""

from __future__ import annotations

import copy
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mol.core.errors import HCPError
from mol.hcp import claude
from mol.hcp.files import prompt_locations, rebase
from mol.hcp.issues import Issue

BASE = Path(__file__).resolve().parent / "examples" / "venti.toml"
"""The default base artifact."""
FEATURES = {"shell_tool": ["terminal"], "unified_exec": ["terminal"],
            "apply_patch_freeform": ["edit_file", "write_file"]}
"""Codex ``[features]`` mol maps: feature -> the mol tools it stands for."""
CODEX_SERVER_FIELDS = ("command", "args", "env", "env_vars", "cwd", "url",
                       "bearer_token_env_var", "http_headers", "env_http_headers",
                       "startup_timeout_sec", "tool_timeout_sec", "enabled", "enabled_tools",
                       "disabled_tools", "required")
"""Codex server fields with the same name and meaning in mol."""


@dataclass
class Imported:
    """The new artifact and the report of the import."""

    artifact: Any
    mapped: list[str] = field(default_factory=list)
    not_mapped: list[str] = field(default_factory=list)


class _Build:
    """The document under construction, relative to the folder it will be written in."""

    def __init__(self, base: Path, out_dir: Path, source: str) -> None:
        from mol.hcp.expand import adapter_configs
        from mol.hcp.loader import load

        artifact = load(base)
        self.out_dir = out_dir
        doc = copy.deepcopy(artifact.raw)
        for loc in prompt_locations(doc):  # inline prompts: the result stands alone
            table = _get(doc, *loc[:-1])
            if isinstance(table, dict) and isinstance(table.get(loc[-1]), dict):
                table[loc[-1]] = artifact.texts[table[loc[-1]]["path"]]
        self.doc = rebase(doc, artifact.base_dir, out_dir)
        self.doc["name"] = f"{artifact.name}-{source.strip('.') or 'imported'}"[:128]
        self.doc["description"] = f"{artifact.name} with the configuration of {source} (mol hcp import)"
        self.doc["parent"] = artifact.digest
        configs = adapter_configs(artifact.doc)
        self.everyone = list(configs)
        self.users = [a for a, c in configs.items() if c.tools.allow] or self.everyone
        self.report = Imported(artifact=None)
        self.problems: list[str] = []

    def rel(self, path: Path) -> str:
        return Path(os.path.relpath(path.resolve(), self.out_dir.resolve())).as_posix()

    def note(self, translation: claude.Translation) -> Any:
        self.report.not_mapped += translation.notes
        self.problems += translation.problems
        return translation.value

    def server(self, name: str, config: dict[str, Any], where: str) -> None:
        servers = self.doc.setdefault("mcp_servers", {})
        if name in servers:
            self.problems.append(f"{where}: MCP server {name!r} is already in the base artifact")
            return
        servers[name] = config
        for adapter in self.users:
            table = _table(self.doc, "adapters", adapter)
            table.setdefault("mcp_servers", []).append(name)
            _add(table.setdefault("tools", {}), "allow", f"mcp__{name}__*")
        self.report.mapped.append(f"{where}: MCP server {name} (for {', '.join(self.users)})")

    def hooks(self, events: dict[str, list[Any]], where: str) -> None:
        for event, matchers in events.items():
            self.doc.setdefault("hooks", {}).setdefault(event, []).extend(matchers)
            count = sum(len(m["hooks"]) for m in matchers)
            self.report.mapped.append(f"{where}: {count} {event} hook(s)")

    def allow_skills(self, names: list[str]) -> None:
        for adapter in self.users:
            for name in names:
                _add(_table(self.doc, "adapters", adapter), "skills", name)

    def finish(self) -> Imported:
        from mol.hcp.loader import load_dict

        if self.problems:
            raise HCPError([Issue(p) for p in self.problems])
        self.report.artifact = load_dict(self.doc, base_dir=self.out_dir, file="<imported>")
        return self.report


def _get(doc: Any, *keys: str) -> Any:
    for key in keys:
        doc = doc.get(key) if isinstance(doc, dict) else None
    return doc


def _table(doc: dict[str, Any], *keys: str) -> dict[str, Any]:
    for key in keys:
        doc = doc.setdefault(key, {})
    return doc


def _add(table: dict[str, Any], key: str, value: str) -> None:
    values = table.setdefault(key, [])
    if value not in values:
        values.append(value)


def _read_json(path: Path, build: _Build) -> Any:
    import json

    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        build.problems.append(f"{path}: not valid JSON: {exc}")
        return None


def from_claude(project: Path, out_dir: Path, base: Path = BASE) -> Imported:
    """Import a Claude Code project folder."""
    if not project.is_dir():
        raise HCPError([Issue(f"{project}: not a folder (give the Claude Code project folder)")])
    build = _Build(base, out_dir, project.resolve().name)
    root = build.rel(project)
    mcp = project / ".mcp.json"
    if mcp.is_file() and (data := _read_json(mcp, build)) is not None:
        for name, entry in (build.note(claude.mcp_entries(data, str(mcp))) or {}).items():
            config = build.note(claude.mcp_server(name, entry, str(mcp), root,
                                                  {"CLAUDE_PROJECT_DIR": root}))
            if config is not None:
                build.server(name, config, str(mcp))
    for settings in (project / ".claude" / "settings.json",
                     project / ".claude" / "settings.local.json"):
        if settings.is_file() and (data := _read_json(settings, build)) is not None:
            _claude_settings(build, settings, data, root)
    folder = project / ".claude"
    if (folder / "skills").is_dir() or (folder / "commands").is_dir():
        _add(_table(build.doc, "bundles"), "paths", build.rel(folder))
        for adapter in build.users:
            _add(_table(build.doc, "adapters", adapter), "bundles", "claude")
        build.report.mapped.append(f"{folder}: skills/ and commands/ as bundle 'claude' (for "
                                   f"{', '.join(build.users)})")
    for other in ("agents", "output-styles"):
        if (folder / other).is_dir():
            build.report.not_mapped.append(f"{folder / other}: not mapped (mol has no {other})")
    return build.finish()


def _claude_settings(build: _Build, path: Path, data: Any, root: str) -> None:
    if not isinstance(data, dict):
        build.problems.append(f"{path}: must be a JSON object")
        return
    for key in data:
        if key != "hooks":
            build.report.not_mapped.append(f"{path}: {key}: not mapped (mol keeps tool policy "
                                           "and settings in the HCP; set them there)")
    if "hooks" in data:
        events = build.note(claude.hooks_config({"hooks": data["hooks"]}, str(path),
                                                {"CLAUDE_PROJECT_DIR": root}))
        build.hooks(events or {}, str(path))


def from_codex(config: Path, out_dir: Path, base: Path = BASE) -> Imported:
    """Import a Codex ``config.toml``."""
    try:
        data = tomllib.loads(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise HCPError([Issue(f"cannot read as TOML: {exc}", file=str(config))]) from None
    build = _Build(base, out_dir, config.resolve().parent.name)
    servers, features = data.get("mcp_servers") or {}, data.get("features") or {}
    for key, value in (("mcp_servers", servers), ("features", features)):
        if not isinstance(value, dict):
            raise HCPError([Issue(f"{key} must be a table", file=str(config))])
    for name, entry in servers.items():
        _codex_server(build, config, name, entry)
    _codex_features(build, config, features)
    skills = config.parent / "skills"
    if skills.is_dir():
        from mol.skills.loader import discover

        _add(_table(build.doc, "skills"), "paths", build.rel(skills))
        names = [folder.resolve().name for folder in discover(skills)]
        build.allow_skills(names)
        build.report.mapped.append(f"{skills}: {len(names)} skill(s) (for "
                                   f"{', '.join(build.users)})")
    for key in data:
        if key not in ("mcp_servers", "features"):
            build.report.not_mapped.append(f"{config}: {key}: not mapped (mol configures the "
                                           "engine, models and sandbox in the HCP)")
    return build.finish()


def _codex_server(build: _Build, config: Path, name: str, entry: Any) -> None:
    where = f"{config}: mcp_servers.{name}"
    if not isinstance(entry, dict):
        build.problems.append(f"{where}: must be a table")
        return
    server = {key: value for key, value in entry.items() if key in CODEX_SERVER_FIELDS}
    if "startup_timeout_ms" in entry and "startup_timeout_sec" not in entry:
        server["startup_timeout_sec"] = entry["startup_timeout_ms"] / 1000
    build.report.not_mapped += [f"{where}.{key}: not mapped (mol's MCP servers have no such "
                                "field)" for key in entry
                                if key not in (*CODEX_SERVER_FIELDS, "startup_timeout_ms")]
    for key in server.get("env") or {}:
        if claude.is_secret_name(key):
            build.problems.append(f"{where}.env.{key}: a literal value for what looks like a "
                                  f"secret; set {key} in mol's environment and list it in "
                                  "env_vars instead")
    if isinstance(server.get("cwd"), str) and not os.path.isabs(server["cwd"]):
        server["cwd"] = build.rel(config.parent / server["cwd"])
    build.server(name, server, str(config))


def _codex_features(build: _Build, config: Path, features: dict[str, Any]) -> None:
    for feature, enabled in features.items():
        tools = FEATURES.get(feature)
        if tools is None:
            build.report.not_mapped.append(f"{config}: features.{feature}: not mapped (mol has "
                                           "no such feature)")
            continue
        for adapter in build.users if enabled else build.everyone:
            policy = _table(build.doc, "adapters", adapter, "tools")
            for tool in tools:
                _add(policy, "allow" if enabled else "deny", tool)
        verb = "allowed for " + ", ".join(build.users) if enabled else "denied for every adapter"
        build.report.mapped.append(f"{config}: features.{feature}: {', '.join(tools)} {verb}")
