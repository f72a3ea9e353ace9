"""Load Agent Skills: folders whose ``SKILL.md`` holds YAML front matter and instructions.

The format is the public Agent Skills specification (agentskills.io), shared
by Claude Code, Codex, OpenHands and goose::

    pdf-forms/
    ├── SKILL.md        ---\\nname: pdf-forms\\ndescription: ...\\n---\\n<instructions>
    ├── scripts/        optional
    └── references/     optional

``name`` is 1-64 lowercase letters, digits and single hyphens, not starting
or ending with one, and equal to the folder's name; ``description`` is a
non-empty string. ``license``, ``compatibility``, ``metadata`` and
``allowed-tools`` are optional and kept.

Loading is lenient where the ecosystem is: the spec's length limits on
``description`` (1024) and ``compatibility`` (500) and fields outside the spec
(kept in ``Skill.extra``) are *warnings*, because published skills exceed them
and Claude Code loads them anyway; with ``strict=True`` (``mol skills validate
--strict``) they are errors. Every problem names the ``SKILL.md`` and the
field, and all problems of a folder are reported together in one
``SkillError``. Two sources that reach the same folder (a symbolic link to a
skill, say) give one skill, not a duplicate.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mol.core.errors import SkillError

SKILL_FILE = "SKILL.md"
"""The file that makes a folder a skill."""
BUILTIN_ROOT = Path(__file__).resolve().parent
"""The folder holding mol's built-in skills (shipped in the wheel as package data)."""
BUILTIN = "builtin"
"""Source label of the built-in skills."""

NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
KNOWN_FIELDS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")
"""Front-matter fields of the Agent Skills specification."""


@dataclass(frozen=True, eq=False)
class Skill:
    """A validated skill: its front matter, its instructions and where it lives."""

    name: str
    description: str
    folder: Path
    """The skill's folder (absolute)."""
    body: str
    """``SKILL.md`` without its front matter: the instructions ``load_skill`` returns."""
    source: str = BUILTIN
    """Where it came from: ``builtin`` or the path as written in the artifact or on the CLI."""
    license: str | None = None
    compatibility: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    allowed_tools: tuple[str, ...] = ()
    """``allowed-tools``, split into names (the spec allows a string or a list)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Front-matter fields outside the specification, kept as parsed."""
    warnings: tuple[str, ...] = ()
    """Non-fatal findings, e.g. unknown fields."""
    digest: str = ""
    """Digest of the folder's files, set for the skills an HCP artifact's adapters use."""

    @property
    def file(self) -> Path:
        """The skill's ``SKILL.md``."""
        return self.folder / SKILL_FILE


def split_front_matter(text: str, where: str) -> tuple[str, str]:
    """``(front matter YAML, body)`` of a ``SKILL.md`` text; ``SkillError`` when malformed."""
    lines = text.removeprefix("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise SkillError(f"{where}: must start with a '---' line opening the YAML front matter")
    for index in range(1, len(lines)):
        if lines[index].rstrip() == "---":
            body = "".join(lines[index + 1:]).lstrip("\r\n").rstrip() + "\n"
            return "".join(lines[1:index]), body
    raise SkillError(f"{where}: the front matter opened on line 1 is never closed by a '---' line")


def parse_front_matter(source: str, where: str) -> dict[str, Any]:
    """The front matter as a mapping, parsed with PyYAML's safe loader."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        data = yaml.load(source, Loader=loader)  # a safe loader: plain data only
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        # The front matter starts on line 2 of SKILL.md (after the opening '---').
        line = f":{mark.line + 2}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        context, start = getattr(exc, "context", None), getattr(exc, "context_mark", None)
        if context and start is not None:
            problem += f" ({context} on line {start.line + 2})"
        raise SkillError(f"{where}{line}: front matter is not valid YAML: {problem}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SkillError(f"{where}: front matter must be a YAML mapping of fields, "
                         f"got {type(data).__name__}")
    return data


def check_fields(data: dict[str, Any], folder_name: str, where: str,
                 strict: bool = False) -> tuple[list[str], list[str]]:
    """``(problems, warnings)`` of parsed front matter, each naming ``where`` and the field;
    with ``strict`` the warnings are problems too."""
    problems: list[str] = []
    warnings: list[str] = []

    def bad(name: str, message: str) -> None:
        problems.append(f"{where}: {name}: {message}")

    name = data.get("name")
    if "name" not in data:
        bad("name", "required field missing")
    elif not isinstance(name, str) or not name:
        bad("name", f"must be a non-empty string, got {name!r}")
    elif len(name) > MAX_NAME:
        bad("name", f"is {len(name)} characters long; at most {MAX_NAME} are allowed")
    elif not NAME.match(name):
        bad("name", f"{name!r} must be lowercase letters, digits and hyphens, not starting or "
                    "ending with a hyphen and without '--'")
    elif name != folder_name:
        bad("name", f"{name!r} must equal the folder's name {folder_name!r}")
    description = data.get("description")
    if "description" not in data:
        bad("description", "required field missing")
    elif not isinstance(description, str) or not description.strip():
        bad("description", f"must be a non-empty string, got {description!r}")
    elif len(description) > MAX_DESCRIPTION:
        warnings.append(_too_long(where, "description", len(description), MAX_DESCRIPTION))
    problems += _check_optional(data, where, warnings)
    unknown = [key for key in data if key not in KNOWN_FIELDS]
    warnings += [f"{where}: {key}: unknown field (kept; the Agent Skills fields are "
                 f"{', '.join(KNOWN_FIELDS)})" for key in unknown]
    if strict:
        return problems + warnings, []
    return problems, warnings


def _too_long(where: str, name: str, length: int, limit: int) -> str:
    return (f"{where}: {name}: is {length} characters long; the Agent Skills "
            f"specification allows at most {limit}")


def _check_optional(data: dict[str, Any], where: str, warnings: list[str]) -> list[str]:
    problems = []
    license_ = data.get("license")
    if license_ is not None and not isinstance(license_, str):
        problems.append(f"{where}: license: must be a string, got {license_!r}")
    compatibility = data.get("compatibility")
    if "compatibility" in data and (not isinstance(compatibility, str) or not compatibility):
        problems.append(f"{where}: compatibility: must be a non-empty string, got {compatibility!r}")
    elif isinstance(compatibility, str) and len(compatibility) > MAX_COMPATIBILITY:
        warnings.append(_too_long(where, "compatibility", len(compatibility), MAX_COMPATIBILITY))
    metadata = data.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        problems.append(f"{where}: metadata: must be a mapping of strings to strings, "
                        f"got {type(metadata).__name__}")
    elif metadata:
        for key, value in metadata.items():
            if isinstance(value, dict | list) or value is None:
                problems.append(f"{where}: metadata.{key}: must be a string, got {value!r}")
    tools = data.get("allowed-tools")
    if tools is not None and not (
        isinstance(tools, str) or (isinstance(tools, list) and all(isinstance(t, str) for t in tools))
    ):
        problems.append(f"{where}: allowed-tools: must be a space-separated string or a list "
                        f"of strings, got {tools!r}")
    return problems


def load_skill_folder(folder: Path, source: str = BUILTIN, strict: bool = False) -> Skill:
    """Read and validate the skill in ``folder``; ``SkillError`` lists every problem
    (with ``strict``, the warnings too)."""
    folder = Path(folder).resolve()
    file = folder / SKILL_FILE
    where = str(file)
    try:
        text = file.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise SkillError(f"{folder}: no {SKILL_FILE} in this folder") from None
    except OSError as exc:
        raise SkillError(f"{where}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise SkillError(f"{where}: not UTF-8 text (byte {exc.start})") from None
    front, body = split_front_matter(text, where)
    data = parse_front_matter(front, where)
    problems, warnings = check_fields(data, folder.name, where, strict)
    if problems:
        raise _error(problems)
    tools = data.get("allowed-tools") or ()
    return Skill(
        name=data["name"], description=data["description"].strip(), folder=folder, body=body,
        source=source, license=data.get("license"), compatibility=data.get("compatibility"),
        metadata={str(k): str(v) for k, v in (data.get("metadata") or {}).items()},
        allowed_tools=tuple(tools.split() if isinstance(tools, str) else tools),
        extra={k: v for k, v in data.items() if k not in KNOWN_FIELDS},
        warnings=tuple(warnings),
    )


def discover(path: Path) -> list[Path]:
    """Skill folders at ``path``: itself if it holds a ``SKILL.md``, else its subfolders that do."""
    path = Path(path)
    if not path.is_dir():
        raise SkillError(f"{path}: not a folder")
    if (path / SKILL_FILE).is_file():
        return [path]
    return sorted(child for child in path.iterdir()
                  if child.is_dir() and (child / SKILL_FILE).is_file())


def load_sources(sources: Sequence[tuple[str, Path]],
                 strict: bool = False) -> tuple[dict[str, Skill], list[tuple[int, str]]]:
    """Every skill of ``sources`` (``(label, folder)`` pairs) by name, and the problems.

    Problems are ``(index of the source, message)``; a name found twice in two
    different folders is a problem naming both places, never a silent override
    (the first one stays). The same folder reached twice (through a symbolic
    link, or two overlapping sources) is one skill.
    """
    skills: dict[str, Skill] = {}
    problems: list[tuple[int, str]] = []
    for index, (label, path) in enumerate(sources):
        try:
            folders = discover(path)
        except SkillError as exc:
            problems.append((index, str(exc)))
            continue
        for folder in folders:
            try:
                skill = load_skill_folder(folder, source=label, strict=strict)
            except SkillError as exc:
                problems += [(index, p) for p in getattr(exc, "problems", [str(exc)])]
                continue
            first = skills.get(skill.name)
            if first is not None and first.folder == skill.folder:
                continue  # the same folder by another path: one skill
            if first is not None:
                problems.append((index, f"skill {skill.name!r} is defined twice: in {first.folder} "
                                        f"(from {first.source}) and in {skill.folder} "
                                        f"(from {skill.source})"))
                continue
            skills[skill.name] = skill
    return skills, problems


def load_all(sources: Sequence[tuple[str, Path]], strict: bool = False) -> dict[str, Skill]:
    """Like ``load_sources``, but any problem raises one ``SkillError`` listing all."""
    skills, problems = load_sources(sources, strict)
    if problems:
        raise _error([message for _, message in problems])
    return skills


def builtin_skills() -> dict[str, Skill]:
    """mol's built-in skills by name."""
    return load_all([(BUILTIN, BUILTIN_ROOT)])


def _error(problems: list[str]) -> SkillError:
    """One ``SkillError`` for all ``problems``; they stay listed in ``.problems``."""
    text = problems[0] if len(problems) == 1 else "\n".join(
        [f"{len(problems)} problems:", *(f"  {p}" for p in problems)])
    error = SkillError(text)
    error.problems = list(problems)  # type: ignore[attr-defined]
    return error
