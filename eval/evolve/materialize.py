"""A patched evolve document back into an artifact: a folder with its TOML and changed files.

``materialize(parent, doc, folder)`` writes ``folder/hcp.toml`` (``parent`` = the parent's
digest) and, beside it, only what changed: a prompt that lived in a file and was edited goes
to ``prompts/NAME`` (an inline prompt stays inline), an edited or new skill goes to
``skills/NAME/`` (a ``skills.paths`` entry that held several skills is replaced by its
skills one by one, so the others keep pointing at their folders). Everything else is the
parent's document as written, with the differences applied where they are (defaults stay
unwritten) and its file references rewritten to resolve from ``folder``. The result is
loaded and checked: its evolve document must be the one asked for.
"""

from __future__ import annotations

import copy
import os
import shutil
from pathlib import Path
from typing import Any

from mol.core.errors import EvalError, HCPError
from mol.eval.evolve.document import MISSING, SKILLS, changes, document, get, touched
from mol.hcp.changes import toml_text
from mol.hcp.evolvable import KEYS, segments
from mol.hcp.files import prompt_locations, rebase, resolve
from mol.hcp.issues import Issue
from mol.hcp.snapshot import TOML


def materialize(parent: Any, doc: dict[str, Any], folder: Path) -> Any:
    """Write the artifact ``doc`` describes, derived from ``parent``, into ``folder``; returns
    it loaded. ``HCPError`` when ``doc`` is not a valid artifact."""
    from mol.hcp.loader import load

    before = document(parent)
    plain = {k: v for k, v in doc.items() if k != SKILLS}
    folder = Path(folder)
    _prepare(folder)
    raw = copy.deepcopy(parent.raw)
    prompts = {loc for loc in prompt_locations(plain) + prompt_locations(raw)}
    for loc, value in changes({k: v for k, v in before.items() if k != SKILLS}, plain):
        if not any(loc[:len(p)] == p for p in prompts):
            _put(raw, loc, value)
    for loc in sorted(prompts):
        _prompt(raw, loc, get(before, loc), get(plain, loc), parent, folder)
    _skills(raw, before.get(SKILLS, {}), doc.get(SKILLS, {}), parent, folder)
    raw["parent"] = parent.digest
    raw = rebase(raw, parent.base_dir, folder) if _shaped(raw) else raw
    (folder / TOML).write_text(toml_text(raw), encoding="utf-8")
    artifact = load(folder / TOML)
    _check(artifact, doc, before.get(SKILLS) != doc.get(SKILLS))
    return artifact


def _shaped(raw: dict[str, Any]) -> bool:
    """Whether ``raw`` has the shapes file references are rewritten through."""
    from mol.hcp.schema import HCP

    try:
        HCP.model_validate(raw)
    except Exception:  # invalid: loading it reports why, in the loader's words
        return False
    return True


def _prepare(folder: Path) -> None:
    """An empty (or new) folder to write into; refuses one that holds something else."""
    if folder.exists() and any(folder.iterdir()):
        raise EvalError(f"{folder}: not empty; give a new or empty folder")
    folder.mkdir(parents=True, exist_ok=True)


def _put(raw: dict[str, Any], loc: tuple, value: Any) -> None:
    """Set (or, for ``MISSING``, remove) the key at ``loc``, creating tables on the way."""
    holder: Any = raw
    for part in loc[:-1]:
        if not isinstance(holder.get(part), dict):
            if value is MISSING:
                return
            holder[part] = {}
        holder = holder[part]
    if value is MISSING:
        holder.pop(loc[-1], None)
    else:
        holder[loc[-1]] = copy.deepcopy(value)


def _relative(path: Path, parent: Any) -> str:
    """``path`` as a reference written in the parent's document (rebased afterwards)."""
    return Path(os.path.relpath(path, parent.base_dir.resolve())).as_posix()


def _prompt(raw: dict[str, Any], loc: tuple, old: Any, new: Any, parent: Any,
            folder: Path) -> None:
    """The prompt at ``loc``: kept as written when unchanged, else the new text, in a new
    file when the parent's was a file."""
    if new is MISSING:
        _put(raw, loc, MISSING)
        return
    if old == new:
        return
    written = get(raw, loc)
    if isinstance(written, dict) and "path" in written:
        target = _free(folder / "prompts" / Path(written["path"]).name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(new, encoding="utf-8")
        _put(raw, loc, {"path": _relative(target, parent)})
    else:
        _put(raw, loc, new)


def _free(path: Path) -> Path:
    """``path``, or ``NAME-2.EXT`` ... when it is taken."""
    candidate, number = path, 1
    while candidate.exists():
        number += 1
        candidate = path.with_name(f"{path.stem}-{number}{path.suffix}")
    return candidate


def _skills(raw: dict[str, Any], old: dict[str, Any], new: dict[str, Any], parent: Any,
            folder: Path) -> None:
    """Write the edited and new skills into ``folder/skills`` and point ``skills.paths`` at
    them; drop the removed ones."""
    from mol.eval.evolve.document import own_skills

    if old == new:
        return
    own = own_skills(parent)
    edited = {name for name in new if name in old and new[name] != old[name]}
    added = [name for name in new if name not in old]
    gone = {name for name in old if name not in new} | edited
    section = raw.setdefault("skills", {})
    paths: list[str] = []
    for ref in section.get("paths", []):
        members = [s for s in own.values() if s.source == ref]
        if not any(s.name in gone for s in members):
            paths.append(ref)
            continue
        paths += [_relative(s.folder, parent) for s in members if s.name not in gone]
    for name in sorted(edited) + added:
        source = own[name].folder if name in own else None
        target = folder / "skills" / (source.name if source else name)
        _write_skill(target, source, new[name])
        paths.append(_relative(target, parent))
    section["paths"] = paths


def _write_skill(target: Path, source: Path | None, files: dict[str, str]) -> None:
    """A skill folder: the original's files (binary ones included), then the text files as
    the document has them (a text file the document dropped is removed)."""
    from mol.eval.evolve.document import skill_files

    if source is not None:
        shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        for relative in skill_files(source):
            if relative not in files:
                (target / relative).unlink()
    for relative, text in files.items():
        path = resolve(target, relative)
        if target.resolve() not in path.parents:
            raise HCPError([Issue(f"/$skills: file {relative!r} is outside its skill folder")])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def _check(artifact: Any, doc: dict[str, Any], skills_moved: bool) -> None:
    """The written artifact must have exactly the evolve document asked for (but its
    ``skills.paths``, rewritten when skills were written anew, and the defaults of what the
    document adds without them: a new adapter's unset keys)."""
    got = {k: v for k, v in document(artifact).items() if k != "parent"}
    want = {k: v for k, v in doc.items() if k != "parent"}
    differ = [p for p in touched(want, got) if not (skills_moved and p == "/skills/paths")
              and not _defaulted(want, p)]
    if differ:
        raise EvalError(f"the written artifact differs from the patched document at "
                        f"{', '.join(differ[:5])} (a value the schema normalizes?)")


def _defaulted(want: dict[str, Any], path: str) -> bool:
    """Whether ``path`` is a key the document asked for leaves unset (the schema's default
    fills it), rather than a value it asked for or an object's set of keys."""
    parts = segments(path)
    return parts[-1:] != [KEYS] and get(want, parts) is MISSING
