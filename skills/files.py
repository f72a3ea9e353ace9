"""Files inside a skill folder, listed and read with every path confined to the folder.

A path the model gives is refused when it is absolute, contains ``..``, or
leads outside the folder through a symbolic link. Binary files are described
rather than shown, and long files are cut with a marker saying how much was left out.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

from mol.skills.loader import SKILL_FILE, Skill

MAX_FILE_BYTES = 64 * 1024
"""Most bytes of one file ``read_text`` returns."""
MAX_LISTED = 200
"""Most files ``list_files`` names."""


class FileRefused(ValueError):
    """A skill file cannot be read as asked; the text is for the model."""


def list_files(skill: Skill) -> list[str]:
    """Relative paths (``/``-separated, sorted) of the skill's files other than ``SKILL.md``.

    Symbolic links leading outside the folder are left out, like ``__pycache__``.
    """
    root = skill.folder.resolve()
    found: list[str] = []
    for current, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            path = Path(current, name)
            relative = path.relative_to(root).as_posix()
            if relative != SKILL_FILE and path.resolve().is_relative_to(root):
                found.append(relative)
    return sorted(found)


def confined(skill: Skill, relative: str, folders: bool = False) -> Path:
    """The absolute path of ``relative`` inside the skill's folder, or ``FileRefused``.

    It must name a file, or with ``folders`` a file or a folder.
    """
    if not relative.strip():
        raise FileRefused("path is empty; give a path relative to the skill folder, "
                          "e.g. references/guide.md")
    if "\x00" in relative:
        raise FileRefused("path contains a NUL character")
    posix = PurePosixPath(relative.replace("\\", "/"))
    if posix.is_absolute() or re.match(r"^[A-Za-z]:", relative):
        raise FileRefused(f"{relative!r} is absolute; give a path relative to the skill folder "
                          "of " + repr(skill.name))
    if ".." in posix.parts:
        raise FileRefused(f"{relative!r} contains '..'; paths must stay inside the skill folder")
    root = skill.folder.resolve()
    target = (root / posix).resolve()
    if not target.is_relative_to(root):
        raise FileRefused(f"{relative!r} leads outside the skill folder (a symbolic link)")
    if not (target.is_file() or (folders and target.is_dir())):
        files = list_files(skill)
        known = ", ".join(files[:MAX_LISTED]) if files else "none besides SKILL.md"
        raise FileRefused(f"skill {skill.name!r} has no file {relative!r}; its files: {known}")
    return target


def files_under(skill: Skill, relative: str) -> list[tuple[str, Path]]:
    """``(relative path, absolute path)`` of the file ``relative``, or of every file in the
    folder ``relative`` (``.`` for the whole skill), confined like ``read_text``."""
    target = confined(skill, relative, folders=True)
    if target.is_file():
        return [(target.relative_to(skill.folder.resolve()).as_posix(), target)]
    root = skill.folder.resolve()
    inside = target.relative_to(root).as_posix()
    prefix = "" if inside == "." else inside + "/"
    chosen = [f for f in [*list_files(skill), SKILL_FILE] if f.startswith(prefix)]
    return [(f, (root / f).resolve()) for f in sorted(chosen)]


def read_text(skill: Skill, relative: str, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The text of one file of the skill, cut to ``max_bytes`` with a marker when longer."""
    path = confined(skill, relative)
    size = path.stat().st_size
    with path.open("rb") as handle:
        data = handle.read(max_bytes)
    if b"\x00" in data:
        return _binary(relative, size)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A cut in the middle of a multi-byte character is not binary content.
        if size <= max_bytes or exc.start < len(data) - 3:
            return _binary(relative, size)
        data = data[: exc.start]
        text = data.decode("utf-8")
    if size > len(data):
        text += (f"\n[... cut: showed the first {len(data)} of {size} bytes of {relative}; "
                 "the rest is not shown]\n")
    return text


def _binary(relative: str, size: int) -> str:
    return f"[{relative} is a binary file of {size} bytes; it cannot be shown as text]"
