"""Built-in plugin: the ``load_skill`` and ``read_skill_file`` tools (progressive disclosure).

An adapter's system prompt lists only the name and description of its
skills; these tools hand over a skill's instructions and its files when the
model asks. Both answer only for the skills the calling adapter lists in the
HCP (``adapters.Lx.skills``); anything else is refused with a message the
model reads.
"""

from __future__ import annotations

from mol.plugins import hookimpl
from mol.runtime.tools import ToolContext, ToolResult


def load_skill(name: str, context: ToolContext) -> ToolResult:
    """Load the instructions of one of your skills, by the name listed in your Skills catalog.

    Returns the skill's instructions and the files in its folder, which
    read_skill_file can read.

    Args:
        name: The skill's name, exactly as in the catalog (e.g. "swe-workflow").
    """
    from mol.skills.catalog import SkillUnavailable, skill_for
    from mol.skills.files import list_files

    try:
        skill = skill_for(context.artifact, context.adapter, name)
    except SkillUnavailable as exc:
        return ToolResult(f"Error: {exc}", is_error=True)
    files = list_files(skill)
    text = f"# Skill: {skill.name}\n\n{skill.body}"
    if files:
        text += (f"\n## Files of this skill\n\nRead one with read_skill_file(skill="
                 f"\"{skill.name}\", path=...):\n" + "".join(f"- {f}\n" for f in files))
    return ToolResult(text, data={"skill": skill.name, "files": files})


def read_skill_file(skill: str, path: str, context: ToolContext) -> ToolResult:
    """Read one file of one of your skills (a reference, a script or an asset).

    Args:
        skill: The skill's name, as in your Skills catalog.
        path: The file's path inside the skill folder, e.g. "references/guide.md".
    """
    from mol.skills.catalog import SkillUnavailable, skill_for
    from mol.skills.files import FileRefused, read_text

    try:
        found = skill_for(context.artifact, context.adapter, skill)
        text = read_text(found, path)
    except (SkillUnavailable, FileRefused) as exc:
        return ToolResult(f"Error: {exc}", is_error=True)
    except OSError as exc:
        return ToolResult(f"Error: cannot read {path!r} of skill {skill!r}: "
                          f"{exc.strerror or exc}", is_error=True)
    return ToolResult(text, data={"skill": skill, "path": path})


@hookimpl
def mol_register_tools(register):
    """Register the skill tools."""
    register(load_skill)
    register(read_skill_file)
