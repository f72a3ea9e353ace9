"""The evolve document of an artifact, and where two documents differ.

Proposals are RFC 6902 patches against this document, so every edit mol evolve can make is
a patch, whether its target is written inline or in a file:

- the HCP document as written, with every default filled in (``/adapters/L1/tools/deny``
  exists even when empty, so ``add .../deny/-`` works) and bundles *not* merged in (they
  stay ``/bundles`` and ``/adapters/NAME/bundles``);
- every prompt as its text, whether inline or a file (``/adapters/L1/prompt``);
- ``/$skills/NAME``: for each skill of the artifact's ``skills.paths``, its text files by
  relative path (``/$skills/git-helper/SKILL.md``, ``/$skills/git-helper/scripts~1x.sh``).
  Built-in and bundle skills are not there: they are not the artifact's to edit.

``touched`` lists the pointers where two documents differ: leaves of objects, whole lists
(an edit inside a list changes the list), and ``/adapters/$keys`` when adapters come or go.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from mol.hcp.evolvable import KEYS, escape, pointer, within
from mol.hcp.files import map_refs, prompt_locations

SKILLS = "$skills"
"""The document key holding the artifact's own skills' files."""

KEYED = ("/adapters",)
"""Objects whose set of keys is itself read (``/adapters/$keys``)."""

MISSING = object()
"""A value absent from a document."""


def document(artifact: Any) -> dict[str, Any]:
    """The evolve document of ``artifact`` (see the module's text). The files it still names
    (hook scripts, skill and bundle folders) are absolute paths: the document means the same
    wherever it is written down."""
    from mol.hcp.schema import HCP

    doc = HCP.model_validate(artifact.raw).model_dump(mode="json", exclude_none=True)
    for loc in prompt_locations(doc):
        holder = get(doc, loc[:-1])
        value = holder.get(loc[-1]) if isinstance(holder, dict) else None
        if isinstance(value, dict) and "path" in value:
            holder[loc[-1]] = artifact.texts[value["path"]]
    doc = map_refs(doc, lambda ref: str(artifact.resolve(ref)))
    doc[SKILLS] = {name: skill_files(skill.folder) for name, skill in
                   sorted(own_skills(artifact).items())}
    return doc


def own_skills(artifact: Any) -> dict[str, Any]:
    """The skills the artifact's ``skills.paths`` provide (name -> ``Skill``)."""
    paths = set(artifact.doc.skills.paths)
    return {name: skill for name, skill in artifact.skills.items() if skill.source in paths}


def skill_files(folder: Path) -> dict[str, str]:
    """The UTF-8 text files of a skill folder by relative path (others are left out: they
    are copied along, never edited)."""
    files = {}
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        try:
            files[path.relative_to(folder).as_posix()] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
    return files


def get(doc: Any, loc: tuple | list) -> Any:
    """The value at key path ``loc`` (``MISSING`` when absent)."""
    for part in loc:
        if isinstance(doc, dict) and part in doc:
            doc = doc[part]
        elif isinstance(doc, list) and isinstance(part, int) and 0 <= part < len(doc):
            doc = doc[part]
        else:
            return MISSING
    return doc


def changes(before: Any, after: Any, loc: tuple = ()) -> list[tuple[tuple, Any]]:
    """``(key path, new value or MISSING)`` for every leaf that differs (lists whole)."""
    if isinstance(before, dict) and isinstance(after, dict):
        out: list[tuple[tuple, Any]] = []
        for key in list(before) + [k for k in after if k not in before]:
            out += changes(before.get(key, MISSING), after.get(key, MISSING), (*loc, key))
        return out
    if before is MISSING and isinstance(after, dict) and after:
        return [item for key, value in after.items()
                for item in changes(MISSING, value, (*loc, key))]
    if _same(before, after):
        return []
    return [(loc, after)]


def _same(a: Any, b: Any) -> bool:
    """Equal values of one JSON type (an int and a float are one type; a boolean is not a
    number)."""
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) \
            and not isinstance(b, bool):
        return a == b
    return type(a) is type(b) and a == b


def touched(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The sorted JSON Pointers where two evolve documents differ (see the module's text)."""
    found = {pointer(*loc) for loc, value in changes(before, after)
             if not (value is MISSING and _tree(get(before, loc)))}
    # A removed object counts by its leaves, like an added one.
    found |= {pointer(*loc) for loc, _ in changes(after, before) if get(after, loc) is MISSING}
    for keyed in KEYED:
        parts = keyed.strip("/").split("/")
        if set(_keys(get(before, parts))) != set(_keys(get(after, parts))):
            found.add(f"{keyed}/{KEYS}")
    return sorted(found)


def _tree(value: Any) -> bool:
    return isinstance(value, dict) and bool(value)


def _keys(value: Any) -> list[str]:
    return list(value) if isinstance(value, dict) else []


def evolvable_parts(doc: dict[str, Any], patterns: list[str]) -> dict[str, Any]:
    """The parts of ``doc`` under ``patterns``, by pointer (what a proposer may edit)."""
    parts: dict[str, Any] = {}

    def walk(value: Any, at: str) -> None:
        if any(within(pattern, at) for pattern in patterns) and at:
            parts[at] = copy.deepcopy(value)
        elif isinstance(value, dict):
            for key, inner in value.items():
                walk(inner, f"{at}/{escape(str(key))}")

    walk(doc, "")
    return parts
