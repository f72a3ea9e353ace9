"""Agent Skills (``SKILL.md`` folders): the built-in set, their loader and their files.

The built-in skills live in this package's folders (``swe-workflow``,
``terminal-basics``, ``personal-agent``, ``ui4a-genui``). This floor knows nothing of
the HCP: an artifact's skills are checked by ``mol.hcp.skills``, and what each adapter
is shown of them is ``mol.plugins.catalog``. The public names are re-exported lazily, so
importing ``mol.skills`` parses nothing and imports no YAML until one is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    "load_sources": "loader", "list_files": "files", "read_text": "files",
}

__all__ = ["BUILTIN_ROOT", "Skill", "builtin_skills", "discover", "list_files", "load_all",
           "load_skill_folder", "load_sources", "read_text"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"mol.skills.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'mol.skills' has no attribute {name!r}")
