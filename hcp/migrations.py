"""Ordered migrations of the HCP document between schema versions.

``MIGRATIONS[n]`` turns a version-``n`` document (a plain dict, as parsed from
TOML) into a version ``n + 1`` document. A field is only migrated when its
meaning changes; new optional fields need no migration.
"""

from __future__ import annotations

from collections.abc import Callable

from mol.hcp.schema import SCHEMA_VERSION
from mol.runtime.errors import HCPError

Migration = Callable[[dict], dict]

MIGRATIONS: dict[int, Migration] = {}
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
        doc = MIGRATIONS[version](doc)
        version += 1
        doc["schema_version"] = version
    return doc
