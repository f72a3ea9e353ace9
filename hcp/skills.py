"""The skills of an HCP artifact: what its skill sources provide, checked against what each
adapter names, and the folder digests of the skills in use (they enter the artifact's
digest). The loader calls ``for_artifact`` once per load; ``SKILL.md`` parsing itself is
``mol.skills``, a floor below.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mol.hcp.digest import digest_tree
from mol.hcp.files import resolve
from mol.skills import loader
from mol.skills.loader import BUILTIN, Skill, load_sources


@dataclass
class ArtifactSkills:
    """What ``for_artifact`` found for one artifact document."""

    skills: dict[str, Skill] = field(default_factory=dict)
    """Every skill the artifact's sources provide, by name."""
    digests: dict[str, str] = field(default_factory=dict)
    """Name -> folder digest of each skill an adapter uses, sorted by name."""
    problems: list[tuple[tuple, str, str | None]] = field(default_factory=list)
    """``(key path, message, hint)`` for every problem, for the HCP loader to report."""


def artifact_sources(doc: Any, base_dir: Path) -> list[tuple[tuple, str, Path]]:
    """``(key path, label, folder)`` of each skill source of a validated HCP document."""
    sources: list[tuple[tuple, str, Path]] = []
    if doc.skills.builtin:
        sources.append((("skills", "builtin"), BUILTIN, loader.BUILTIN_ROOT))
    for index, ref in enumerate(doc.skills.paths):
        path = resolve(base_dir, ref)
        if path.is_dir():  # a missing folder is already reported by mol.hcp.files.collect
            sources.append((("skills", "paths", index), ref, path))
    return sources


def for_artifact(doc: Any, base_dir: Path,
                 extra: list[tuple[tuple, str, Path]] = ()) -> ArtifactSkills:
    """Load the skills of a validated HCP document (and of the ``extra`` sources, such as
    its bundles' skill folders); check and digest the adapters' skills."""
    sources = artifact_sources(doc, base_dir) + list(extra)
    skills, found = load_sources([(label, path) for _, label, path in sources])
    result = ArtifactSkills(skills=skills)
    result.problems = [(sources[index][0], message, None) for index, message in found]
    digests: dict[str, str] = {}
    for adapter in doc.adapter_names:
        for index, name in enumerate(doc.adapter(adapter).skills):
            skill = skills.get(name)
            if skill is None:
                result.problems.append((("adapters", adapter, "skills", index),
                                        f"names skill {name!r}, which no skill source provides",
                                        _hint(name, skills, doc)))
            elif name not in digests:
                digests[name] = digest_tree(skill.folder)
                skills[name] = replace(skill, digest=digests[name])
    result.digests = dict(sorted(digests.items()))
    return result


def _hint(name: str, skills: dict[str, Skill], doc: Any) -> str:
    close = difflib.get_close_matches(name, list(skills), n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]!r}?"
    if skills:
        return "available skills: " + ", ".join(sorted(skills))
    if not doc.skills.builtin:
        return "no skills are available: skills.builtin is false and skills.paths provides none"
    return "no skills are available"
