"""The skills of an HCP artifact: what its sources provide, what each adapter may load.

Progressive disclosure: an adapter's system prompt carries only the catalog
(name and description of each of its skills); the ``load_skill`` tool returns
a skill's instructions, and ``read_skill_file`` one file of its folder, when
the model asks for them.
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

CATALOG_HEADER = (
    "# Skills\n"
    "\n"
    "Skills hold instructions for particular kinds of task. When a task matches a skill's "
    "description, call the load_skill tool with the skill's name before you start, then "
    "follow the instructions; read the files they mention with read_skill_file.\n"
    "\n"
)
"""First lines of every catalog. No counters or timestamps: the prompt prefix must stay stable."""


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


def adapter_skills(artifact: Any, adapter: str) -> list[Skill]:
    """The skills adapter ``adapter`` may load, sorted by name."""
    if artifact is None or adapter not in artifact.doc.adapters:
        return []
    available = getattr(artifact, "skills", {}) or {}
    names = sorted(set(artifact.doc.adapter(adapter).skills))
    return [available[name] for name in names if name in available]


def catalog_text(artifact: Any, adapter: str) -> str:
    """The catalog appended to ``adapter``'s system prompt; ``""`` when it has no skills.

    Name and description only, sorted by name, built from what the artifact
    read at load time: byte-identical on every call for the same artifact.
    """
    skills = adapter_skills(artifact, adapter)
    if not skills:
        return ""
    lines = [f"- {skill.name}: {' '.join(skill.description.split())}" for skill in skills]
    return CATALOG_HEADER + "\n".join(lines) + "\n"


def with_catalog(prompt: str, artifact: Any, adapter: str) -> str:
    """``prompt`` with ``adapter``'s catalog appended after a blank line (unchanged without one)."""
    catalog = catalog_text(artifact, adapter)
    if not catalog:
        return prompt
    if not prompt:
        return catalog
    return prompt.rstrip("\n") + "\n\n" + catalog


class SkillUnavailable(LookupError):
    """A tool asked for a skill the calling adapter may not load; the text is for the model."""


def skill_for(artifact: Any, adapter: str, name: str) -> Skill:
    """The skill ``name`` if ``adapter`` may load it, else ``SkillUnavailable`` saying why."""
    if artifact is None:
        raise SkillUnavailable("no HCP artifact is loaded in this session, so no skills exist")
    allowed = [skill.name for skill in adapter_skills(artifact, adapter)]
    if name in allowed:
        return artifact.skills[name]
    if not allowed:
        raise SkillUnavailable(f"adapter {adapter} has no skills; {name!r} cannot be loaded")
    close = difflib.get_close_matches(name, allowed, n=1, cutoff=0.6)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise SkillUnavailable(f"skill {name!r} is not available to adapter {adapter}; its skills "
                           f"are: {', '.join(allowed)}.{hint}")
