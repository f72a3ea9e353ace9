"""``mol skills``: list, show and validate Agent Skills."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from mol.cli.commands.common import add_adapter_argument
from mol.core.errors import UsageError


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``mol skills`` subcommands."""
    sub = parser.add_subparsers(dest="skills_command", metavar="SUBCOMMAND", required=True)

    p = sub.add_parser("list", help="list the skills available (built-in, or an artifact's)")
    p.add_argument("--hcp", type=Path, metavar="FILE",
                   help="list the skills of this HCP artifact (default: the built-in set)")
    add_adapter_argument(p, "only the skills this adapter of the artifact may load (needs --hcp)")
    p.set_defaults(func=list_skills)

    p = sub.add_parser("show", help="print a skill's front matter, files and instructions")
    p.add_argument("name", help="the skill's name")
    p.add_argument("--hcp", type=Path, metavar="FILE",
                   help="look among this artifact's skills (default: the built-in set)")
    p.set_defaults(func=show)

    p = sub.add_parser("validate", help="check a skill folder or a folder of skill folders")
    p.add_argument("path", type=Path, help="a skill folder, its SKILL.md, or a folder of skills")
    p.add_argument("--strict", action="store_true",
                   help="treat what the Agent Skills spec forbids but mol tolerates "
                        "(long descriptions, unknown fields) as errors")
    p.set_defaults(func=validate)


def _available(hcp: Path | None) -> tuple[dict[str, Any], Any]:
    """``(skills by name, artifact or None)``: an artifact's skills, or the built-in set."""
    if hcp is None:
        from mol.skills.loader import builtin_skills

        return builtin_skills(), None
    from mol.hcp.loader import load

    artifact = load(hcp)
    return artifact.skills, artifact


def list_skills(args: argparse.Namespace) -> int:
    """Print one line per skill: name, the adapters using it, source and description."""
    if args.adapter and args.hcp is None:
        raise UsageError("--adapter needs --hcp FILE: adapters and their skills come from an "
                         "HCP artifact")
    from mol.cli.commands.common import checked_adapter

    skills, artifact = _available(args.hcp)
    users: dict[str, list[str]] = {}
    if artifact is not None:
        checked_adapter(artifact, args.adapter)
        for adapter in artifact.doc.adapter_names:
            for name in artifact.doc.adapter(adapter).skills:
                users.setdefault(name, []).append(adapter)
    names = sorted(skills)
    if args.adapter:
        names = [n for n in names if args.adapter in users.get(n, [])]
    if not names:
        print("no skills" + (f" for adapter {args.adapter}" if args.adapter else ""),
              file=sys.stderr)
        return 0
    width = max(len(n) for n in names)
    for name in names:
        skill = skills[name]
        for warning in skill.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        used = ",".join(users.get(name, [])) or "-"
        description = " ".join(skill.description.split())
        if len(description) > 90:
            description = description[:87] + "..."
        print(f"{name:<{width}}  {used:<11}  {skill.source:<8}  {description}")
    return 0


def show(args: argparse.Namespace) -> int:
    """Print a skill: front matter fields, its folder, its files, then its instructions."""
    from mol.skills.files import list_files

    skills, _ = _available(args.hcp)
    skill = skills.get(args.name)
    if skill is None:
        import difflib

        close = difflib.get_close_matches(args.name, list(skills), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else (
            f"; available: {', '.join(sorted(skills))}" if skills else "")
        raise UsageError(f"no skill named {args.name!r}{hint}")
    print(f"name: {skill.name}")
    print(f"description: {' '.join(skill.description.split())}")
    for label, value in (("license", skill.license), ("compatibility", skill.compatibility)):
        if value:
            print(f"{label}: {value}")
    if skill.allowed_tools:
        print(f"allowed-tools: {' '.join(skill.allowed_tools)}")
    for key, value in sorted(skill.metadata.items()):
        print(f"metadata.{key}: {value}")
    print(f"source: {skill.source}")
    print(f"folder: {skill.folder}")
    files = list_files(skill)
    print("files: " + (", ".join(files) if files else "(none besides SKILL.md)"))
    print("---")
    sys.stdout.write(skill.body)
    return 0


def validate(args: argparse.Namespace) -> int:
    """Validate every skill at PATH: one line each (valid, valid with warnings, invalid);
    exit 2 only when a skill is invalid. ``--strict`` makes the warnings errors."""
    from mol.core.errors import SkillError
    from mol.skills.loader import SKILL_FILE, discover

    path: Path = args.path
    if path.name == SKILL_FILE and path.is_file():
        path = path.parent
    if not path.exists():
        raise UsageError(f"{args.path}: no such file or folder")
    folders = discover(path)
    if not folders:
        raise SkillError(f"{args.path}: no {SKILL_FILE} in this folder or in its subfolders")
    seen: dict[str, Any] = {}
    invalid = 0
    for folder in folders:
        line, skill = _validated(folder, str(args.path), args.strict)
        if skill is not None:
            first = seen.setdefault(skill.name, skill)
            if first is not skill and first.folder == skill.folder:
                line = f"{folder}: valid ({skill.name}; the same folder as {first.folder})"
            elif first is not skill:
                line, skill = (f"{folder}: invalid: skill {skill.name!r} is defined twice "
                               f"(also in {first.folder})"), None
        invalid += skill is None
        print(line)
    if invalid:
        raise SkillError(f"{invalid} of {len(folders)} skill(s) invalid")
    return 0


def _validated(folder: Path, source: str, strict: bool) -> tuple[str, Any]:
    """``(line, skill or None)``: one skill folder's verdict, its messages without the
    ``SKILL.md`` path the line already names."""
    from mol.core.errors import SkillError
    from mol.skills.loader import SKILL_FILE, load_skill_folder

    prefix = f"{folder.resolve() / SKILL_FILE}: "

    def short(messages: Any) -> str:
        return "; ".join(m.removeprefix(prefix) for m in messages)

    try:
        skill = load_skill_folder(folder, source=source, strict=strict)
    except SkillError as exc:
        return f"{folder}: invalid: {short(getattr(exc, 'problems', [str(exc)]))}", None
    if skill.warnings:
        count = len(skill.warnings)
        return (f"{folder}: valid ({skill.name}) with {count} warning{'s' * (count > 1)}: "
                f"{short(skill.warnings)}"), skill
    return f"{folder}: valid ({skill.name})", skill
