"""Ordered migrations of the HCP document between schema versions.

``MIGRATIONS[n]`` turns a version-``n`` document (a plain dict, as parsed from
TOML) into a version ``n + 1`` document. A field is only migrated when its
meaning changes; new optional fields need no migration.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from mol.core.errors import HCPError
from mol.hcp.schema import SCHEMA_VERSION, SEED_ADAPTERS

Migration = Callable[[dict], dict]


def _population(doc: dict) -> dict:
    """1 -> 2: adapters became a declared population. A version-1 document always had the
    four seed adapters (absent tables took the defaults), its router and summary ran on L0
    and fell back on it; version 2 spells that out, since its defaults follow the
    population (fallback: the first label; summary: the answering adapter)."""
    doc = dict(doc)
    adapters = doc.get("adapters")
    if adapters is None or isinstance(adapters, dict):
        adapters = dict(adapters or {})
        _only_seed(adapters)
        for name in SEED_ADAPTERS:
            adapters.setdefault(name, {})
        doc["adapters"] = adapters
    for section, key in (("router", "fallback"), ("summary", "adapter")):
        table = doc.get(section, {} if section == "summary" else None)
        if isinstance(table, dict) and key not in table:
            doc[section] = {**table, key: "L0"}
    return doc


def _only_seed(adapters: dict) -> None:
    """Version 1 knew the seed adapters only; another name there was (and stays) a typo."""
    import difflib

    from mol.hcp.issues import Issue

    def hint(name: str) -> str:
        close = difflib.get_close_matches(name, SEED_ADAPTERS, n=1)
        return (f"did you mean {close[0]!r}? " if close else "valid keys: L0, L1, L2, L3; ") + (
            "schema_version = 2 declares any adapters")

    unknown = [str(name) for name in adapters if name not in SEED_ADAPTERS]
    if unknown:
        raise HCPError([Issue("unknown key", path=f"adapters.{name}", hint=hint(name))
                        for name in unknown])


MIGRATIONS: dict[int, Migration] = {1: _population}
"""Version ``n`` -> version ``n + 1``. Version 1 is the first published schema."""

OLDEST_VERSION = 1
"""The oldest ``schema_version`` this mol can migrate from."""


def migrate(raw: dict, file: str | None = None) -> dict:
    """Bring a parsed document up to ``SCHEMA_VERSION``; raise ``HCPError`` if impossible."""
    from mol.hcp.issues import Issue

    if not isinstance(raw, dict):
        raise HCPError([Issue(f"the document must be a table, got {type(raw).__name__}",
                              file=file)])
    version = raw.get("schema_version")
    if version is None:
        raise HCPError([Issue("required key missing", file=file, path="schema_version",
                              hint=f"add 'schema_version = {SCHEMA_VERSION}' at the top")])
    if not isinstance(version, int) or isinstance(version, bool):
        raise HCPError([Issue(f"must be an integer, got {version!r}", file=file,
                              path="schema_version")])
    if version > SCHEMA_VERSION:
        raise HCPError([Issue(
            f"schema_version {version} is newer than this mol understands "
            f"(it reads up to {SCHEMA_VERSION})", file=file, path="schema_version",
            hint="upgrade mol-agent")])
    if version < OLDEST_VERSION:
        raise HCPError([Issue(f"schema_version {version} does not exist (oldest is "
                              f"{OLDEST_VERSION})", file=file, path="schema_version")])
    doc = dict(raw)
    while version < SCHEMA_VERSION:
        try:
            doc = MIGRATIONS[version](doc)
        except HCPError as exc:  # a migration knows the key path; the file is known here
            raise HCPError([replace(i, file=i.file or file) for i in exc.issues]) from None
        version += 1
        doc["schema_version"] = version
    return doc
