"""Built-in plugin: the ``load_skill`` and ``read_skill_file`` tools (progressive disclosure).

An adapter's system prompt lists only the name and description of its
skills; these tools hand over a skill's instructions and its files when the
model asks. Both answer only for the skills the calling adapter lists in the
HCP (``adapters.Lx.skills``); anything else is refused with a message the
model reads. ``read_skill_file(..., to_workspace=True)`` copies a skill's
files into the session's sandbox workspace, for scripts that must run there.
"""

from __future__ import annotations

import os
import shlex
from typing import Any

import anyio

from mol.core.tools import ToolContext, ToolResult
from mol.plugins import hookimpl

WORKSPACE_FOLDER = ".mol-skills"
"""Where ``read_skill_file(..., to_workspace=True)`` puts skill files in the sandbox workspace."""
MAX_COPY_BYTES = 16 * 1024 * 1024
"""Most bytes one copy into the workspace may carry."""


def load_skill(name: str, context: ToolContext) -> ToolResult:
    """Load the instructions of one of your skills, by the name listed in your Skills catalog.

    Returns the skill's instructions and the files in its folder, which
    read_skill_file can read.

    Args:
        name: The skill's name, exactly as in the catalog (e.g. "swe-workflow").
    """
    from mol.plugins.catalog import SkillUnavailable, skill_for
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


async def read_skill_file(skill: str, path: str, context: ToolContext,
                          to_workspace: bool = False) -> ToolResult:
    """Read one file of one of your skills (a reference, a script or an asset).

    With to_workspace, the file (or every file of a folder such as "scripts")
    is copied into your sandbox workspace under .mol-skills/<skill>/ instead,
    so that you can run it there.

    Args:
        skill: The skill's name, as in your Skills catalog.
        path: The file's path inside the skill folder, e.g. "references/guide.md".
        to_workspace: Copy the file or folder into the sandbox workspace instead of
            showing it.
    """
    from mol.plugins.catalog import SkillUnavailable, skill_for
    from mol.skills.files import FileRefused, read_text

    try:
        found = skill_for(context.artifact, context.adapter, skill)
        if to_workspace:
            return await _copy_to_workspace(found, path, context)
        text = await anyio.to_thread.run_sync(read_text, found, path)
    except (SkillUnavailable, FileRefused) as exc:
        return ToolResult(f"Error: {exc}", is_error=True)
    except OSError as exc:
        return ToolResult(f"Error: cannot read {path!r} of skill {skill!r}: "
                          f"{exc.strerror or exc}", is_error=True)
    return ToolResult(text, data={"skill": skill, "path": path})


async def _copy_to_workspace(skill: Any, path: str, context: ToolContext) -> ToolResult:
    """Copy skill files into the session's sandbox workspace (executable bits kept)."""
    from mol.core.errors import SandboxError
    from mol.plugins.builtin.sandbox import session_sandbox
    from mol.skills.files import files_under

    items = files_under(skill, path)
    size = sum(source.stat().st_size for _, source in items)
    if size > MAX_COPY_BYTES:
        return ToolResult(f"Error: {path!r} of skill {skill.name!r} holds {size} bytes; at most "
                          f"{MAX_COPY_BYTES} are copied at once", is_error=True)
    written, executable = [], []
    try:
        sandbox = await session_sandbox(context)
        for relative, source in items:
            data = await anyio.to_thread.run_sync(source.read_bytes)
            where = await sandbox.write_file(f"{WORKSPACE_FOLDER}/{skill.name}/{relative}", data)
            written.append(where)
            if os.access(source, os.X_OK):
                executable.append(where)
        if executable:
            result = await sandbox.run("chmod +x -- " + " ".join(map(shlex.quote, executable)),
                                       timeout=30, clean=True)
            if result.exit_code != 0:
                raise SandboxError(f"chmod failed: {result.render()}")
    except SandboxError as exc:
        return ToolResult(f"Error: copying skill files into the workspace failed: {exc}",
                          is_error=True)
    lines = "".join(f"- {where}{' (executable)' if where in executable else ''}\n"
                    for where in written)
    return ToolResult(f"Copied {len(written)} file(s) of skill {skill.name!r} into the "
                      f"workspace:\n{lines}", data={"skill": skill.name, "written": written})


@hookimpl
def mol_register_tools(register):
    """Register the skill tools."""
    register(load_skill)
    register(read_skill_file)
