"""The skill catalog: what each adapter is shown of its skills, and which it may load.

Progressive disclosure: an adapter's system prompt carries only the catalog
(name and description of each of its skills); the ``load_skill`` tool returns
a skill's instructions, and ``read_skill_file`` one file of its folder, when
the model asks for them (``mol.plugins.builtin.skills``).
"""

from __future__ import annotations

import difflib
from typing import Any

from mol.skills.loader import Skill

CATALOG_HEADER = (
    "# Skills\n"
    "\n"
    "Skills hold instructions for particular kinds of task. When a task matches a skill's "
    "description, call the load_skill tool with the skill's name before you start, then "
    "follow the instructions; read the files they mention with read_skill_file.\n"
    "\n"
)
"""First lines of every catalog. No counters or timestamps: the prompt prefix must stay stable."""


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
