"""An artifact's bundles, merged into its document.

``load_bundles`` reads every folder of ``[bundles] paths``; ``expand`` gives
each adapter what the bundles it names provide, as if written in its table:
the bundles' skills join its ``skills``, their MCP servers join
``[mcp_servers]`` (named ``plugin_<bundle>_<server>``, as Claude Code names them) and
its ``mcp_servers``, and their tools are allowed (``mcp__plugin_<bundle>_<server>__*``;
the adapter's own ``ask`` and ``deny`` patterns still win). Hooks and slash commands stay with
their bundle (``mol.runtime.lifecycle`` and the harness use them).

Nothing here depends on which adapters exist: it walks whatever population
the document's ``[adapters]`` holds.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from mol.hcp.bundles import Bundle, load
from mol.hcp.files import resolve
from mol.hcp.slash import BUILTIN_COMMANDS


def adapter_configs(doc: Any) -> dict[str, Any]:
    """Adapter name -> its ``AdapterConfig``, for any population of adapters."""
    adapters = doc.adapters
    if isinstance(adapters, dict):
        return dict(adapters)
    return {name: getattr(adapters, name) for name in type(adapters).model_fields}


def bundle_users(doc: Any) -> dict[str, list[str]]:
    """Bundle name -> the adapters that use it, in the document's order."""
    users: dict[str, list[str]] = {}
    for adapter, config in adapter_configs(doc).items():
        for name in config.bundles:
            users.setdefault(name, []).append(adapter)
    return users


def load_bundles(doc: Any, base_dir: Path) -> tuple[dict[str, Bundle], list[tuple]]:
    """Every bundle of ``[bundles] paths`` by name, and ``(loc, message)`` problems."""
    from mol.core.errors import SkillError
    from mol.skills.loader import discover

    found: dict[str, Bundle] = {}
    problems: list[tuple] = []
    for index, ref in enumerate(doc.bundles.paths):
        loc = ("bundles", "paths", index)
        if not resolve(base_dir, ref).is_dir():
            continue  # mol.hcp.files.collect reports the missing folder
        bundle, errors = load(ref, base_dir)
        problems += [(loc, message) for message in errors]
        if bundle is None:
            continue
        if bundle.name in found:
            problems.append((loc, f"bundle {bundle.name!r} is loaded twice: from "
                                  f"{found[bundle.name].folder} and from {bundle.folder}"))
            continue
        for source in bundle.skill_sources:
            try:
                bundle.skills += [f.resolve().name for f in discover(source)
                                  if f.resolve().name not in bundle.skills]
            except SkillError:
                pass  # not a folder: the skill loader reports it
        found[bundle.name] = bundle
    return found, problems


def skill_sources(doc: Any, bundles: dict[str, Bundle]) -> list[tuple[tuple, str, Path]]:
    """``(key path, label, folder)`` of the bundles' skill folders, for the skill loader."""
    index = {ref: i for i, ref in enumerate(doc.bundles.paths)}
    return [(("bundles", "paths", index.get(b.ref, 0)), f"bundle {b.name}", source)
            for b in bundles.values() for source in b.skill_sources]


def expand(doc: Any, bundles: dict[str, Bundle]) -> tuple[Any, list[tuple]]:
    """The document with each adapter's bundles merged in, and ``(loc, message, hint)``
    problems (an unknown bundle, an MCP server name taken twice)."""
    problems: list[tuple] = []
    updated: dict[str, Any] = {}
    used: dict[str, Bundle] = {}
    for adapter, config in adapter_configs(doc).items():
        if not config.bundles:
            continue
        skills, servers, allow = list(config.skills), list(config.mcp_servers), list(config.tools.allow)
        for index, name in enumerate(config.bundles):
            bundle = bundles.get(name)
            if bundle is None:
                problems.append((("adapters", adapter, "bundles", index),
                                 f"names bundle {name!r}, which no folder of bundles.paths "
                                 "provides", _hint(name, bundles)))
                continue
            used[name] = bundle
            skills += [s for s in bundle.skills if s not in skills]
            servers += [s for s in bundle.mcp_servers if s not in servers]
            allow += [p for p in (f"mcp__{s}__*" for s in bundle.mcp_servers) if p not in allow]
        updated[adapter] = config.model_copy(update={
            "skills": skills, "mcp_servers": servers,
            "tools": config.tools.model_copy(update={"allow": allow})})
    all_servers = dict(doc.mcp_servers)
    refs = {ref: i for i, ref in enumerate(doc.bundles.paths)}
    for bundle in used.values():
        for name, server in bundle.mcp_servers.items():
            if name in all_servers:
                problems.append((("bundles", "paths", refs.get(bundle.ref, 0)),
                                 f"bundle {bundle.name!r} brings MCP server {name!r}, a name "
                                 "[mcp_servers] already has", "rename one of them"))
                continue
            all_servers[name] = server
    adapters = doc.adapters
    adapters = ({**adapters, **updated} if isinstance(adapters, dict)
                else adapters.model_copy(update=updated))
    return doc.model_copy(update={"adapters": adapters, "mcp_servers": all_servers}), problems


def commands(doc: Any, bundles: dict[str, Bundle]) -> tuple[dict[str, Any], list[str]]:
    """The slash commands of the bundles some adapter uses: ``bundle:name`` always, ``name``
    when only one bundle has it; and a warning per ambiguous short name."""
    table: dict[str, Any] = {}
    owners: dict[str, list[str]] = {}
    for name in bundle_users(doc):
        bundle = bundles.get(name)
        for command in (bundle.commands.values() if bundle else ()):
            table[command.qualified] = command
            owners.setdefault(command.name, []).append(command.qualified)
    warnings = []
    for short, qualified in sorted(owners.items()):
        if short in BUILTIN_COMMANDS:
            warnings.append(f"command /{short} of {' and '.join(qualified)} is shadowed in "
                            f"mol chat by its built-in /{short}: call it "
                            + " or ".join(f"/{q}" for q in qualified))
        if len(qualified) == 1:
            table.setdefault(short, table[qualified[0]])
        else:
            warnings.append(f"command /{short} is in several bundles: call it "
                            + " or ".join(f"/{q}" for q in qualified))
    return table, warnings


def _hint(name: str, bundles: dict[str, Bundle]) -> str | None:
    close = difflib.get_close_matches(name, list(bundles), n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]!r}?"
    return ("bundles loaded: " + ", ".join(sorted(bundles))) if bundles else (
        "no bundles are loaded: add the folder to [bundles] paths")
