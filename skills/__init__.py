"""Agent Skills (``SKILL.md`` folders): the built-in set and their loader.

The built-in skills live in this package's folders (``swe-workflow``,
``terminal-basics``, ``personal-agent``, ``ui4a-genui``). The public names
are re-exported lazily, so importing ``mol.skills`` parses nothing and
imports no YAML or HCP code until one is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mol.skills.catalog import (
        adapter_skills,
        catalog_text,
        for_artifact,
        skill_for,
        with_catalog,
    )
    from mol.skills.files import list_files, read_text
    from mol.skills.loader import (
        BUILTIN_ROOT,
        Skill,
        builtin_skills,
        discover,
        load_all,
        load_skill_folder,
        load_sources,
    )

_EXPORTS = {
    "BUILTIN_ROOT": "loader", "Skill": "loader", "builtin_skills": "loader",
    "discover": "loader", "load_all": "loader", "load_skill_folder": "loader",
    "load_sources": "loader",
    "adapter_skills": "catalog", "catalog_text": "catalog", "for_artifact": "catalog",
    "skill_for": "catalog", "with_catalog": "catalog",
    "list_files": "files", "read_text": "files",
}

__all__ = [
    "BUILTIN_ROOT", "Skill", "adapter_skills", "builtin_skills", "catalog_text", "discover",
    "for_artifact", "list_files", "load_all", "load_skill_folder", "load_sources", "read_text",
    "skill_for", "with_catalog",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"mol.skills.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'mol.skills' has no attribute {name!r}")
