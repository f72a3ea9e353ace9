"""Files an artifact names: prompts, hook scripts, skill folders and bundle folders.

They are resolved relative to the artifact's folder, must exist, and enter
the artifact's digest through their own digests.
"""

from __future__ import annotations

import copy
import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mol.hcp.digest import digest_file, digest_tree
from mol.hcp.loras import is_uri


def prompt_locations(doc: Any) -> list[tuple]:
    """Key paths of every prompt a (possibly invalid) document may hold: the router's (and its
    descriptions file), the summary's, the identity prompt, the compaction's, and each declared adapter's own and
    compaction prompt."""
    adapters = doc.get("adapters") if isinstance(doc, dict) else None
    names = [name for name in adapters if isinstance(name, str)] if isinstance(
        adapters, dict) else []
    return [("router", "prompt"), ("router", "descriptions"), ("summary", "prompt"), ("model", "identity"),
            ("compaction", "prompt"),
            *(loc for name in names
              for loc in (("adapters", name, "prompt"), ("adapters", name, "compaction",
                                                         "prompt")))]


@dataclass
class Found:
    """What ``collect`` found: digests and texts of the files, and the problems."""

    digests: dict[str, str] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    problems: list[tuple[tuple, str]] = field(default_factory=list)


def resolve(base_dir: Path, relative: str) -> Path:
    """Absolute path of a reference written in the artifact."""
    return (base_dir / Path(relative).expanduser()).resolve()


FOLDER_LISTS = (("skills", "paths"), ("bundles", "paths"))
"""Lists of folders the artifact names; each folder enters the digest as a whole."""


def command_files(command: str) -> list[str]:
    """Words of a hook command that name files relative to the artifact: they contain a
    ``/``, no whitespace (``sh -c 'a | b'`` names no file), and are not absolute or options."""
    try:
        words = shlex.split(command)
    except ValueError:
        return []
    return [w for w in words if "/" in w and not w.startswith(("/", "-", "~"))
            and not any(c.isspace() for c in w)]


def _get(raw: Any, *keys: Any) -> Any:
    for key in keys:
        if isinstance(key, int):
            if not isinstance(raw, list) or key >= len(raw):
                return None
        elif not isinstance(raw, dict):
            return None
        raw = raw[key] if isinstance(key, int) else raw.get(key)
    return raw


def _items(raw: Any) -> list[tuple[int, Any]]:
    return list(enumerate(raw)) if isinstance(raw, list) else []


def collect(raw: dict, base_dir: Path) -> Found:
    """Check every file the (possibly invalid) document names; digest and read them.

    Tolerant of a malformed document, so that missing files are reported
    together with schema errors.
    """
    found = Found()
    for loc in prompt_locations(raw):
        ref = _get(raw, *loc, "path")
        if isinstance(ref, str) and ref:
            _prompt(found, (*loc, "path"), base_dir, ref)
    for event, matchers in (_get(raw, "hooks") or {}).items() if isinstance(
        _get(raw, "hooks"), dict
    ) else ():
        for i, matcher in _items(matchers):
            for j, hook in _items(_get(matcher, "hooks")):
                command = _get(hook, "command")
                if isinstance(command, str):
                    loc = ("hooks", event, i, "hooks", j, "command")
                    for word in command_files(command):
                        _file(found, loc, base_dir, word)
    for section in FOLDER_LISTS:
        for i, folder in _items(_get(raw, *section)):
            if isinstance(folder, str):
                path = resolve(base_dir, folder)
                if not path.is_dir():
                    found.problems.append(((*section, i), f"folder not found: {folder} "
                                           f"(looked for {path})"))
                else:
                    found.digests[folder] = digest_tree(path)
    return found


def _file(found: Found, loc: tuple, base_dir: Path, ref: str) -> Path | None:
    path = resolve(base_dir, ref)
    if not path.is_file():
        found.problems.append((loc, f"file not found: {ref} (looked for {path})"))
        return None
    found.digests[ref] = digest_file(path)
    return path


def _prompt(found: Found, loc: tuple, base_dir: Path, ref: str) -> None:
    path = _file(found, loc, base_dir, ref)
    if path is None:
        return
    try:
        found.texts[ref] = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        found.problems.append((loc, f"{ref} is not UTF-8 text (byte {exc.start})"))


def map_refs(doc: dict, fn: Callable[[str], str], loras: bool = True) -> dict:
    """A copy of a valid document with each file reference ``ref`` replaced by ``fn(ref)``
    (with ``loras``, the adapters' LoRA paths on disk too: their content enters the digest
    as their ``sha256``, not as a file of the artifact)."""
    doc = copy.deepcopy(doc)
    for config in (doc.get("adapters") or {}).values() if loras else ():
        lora = config.get("lora") if isinstance(config, dict) else None
        if isinstance(lora, dict) and isinstance(lora.get("path"), str) and not is_uri(
                lora["path"]):
            lora["path"] = fn(lora["path"])
    for loc in prompt_locations(doc):
        prompt = _get(doc, *loc)
        if isinstance(prompt, dict):
            prompt["path"] = fn(prompt["path"])
    for matchers in (doc.get("hooks") or {}).values():
        for matcher in matchers:
            for hook in matcher["hooks"]:
                refs = set(command_files(hook["command"]))
                hook["command"] = shlex.join(
                    fn(word) if word in refs else word for word in shlex.split(hook["command"])
                )
    for key, inner in FOLDER_LISTS:
        section = doc.get(key) or {}
        if section.get(inner):
            section[inner] = [fn(p) for p in section[inner]]
    return doc


def substitute(doc: dict, digests: dict[str, str]) -> dict:
    """The document with each file reference replaced by the file's digest, and each
    LoRA by its hash alone (where the engine reads it is no part of what it is)."""
    doc = map_refs(doc, digests.__getitem__, loras=False)
    for config in (doc.get("adapters") or {}).values():
        if isinstance(config, dict) and isinstance(config.get("lora"), dict):
            config["lora"].pop("path", None)
    return doc


def rebase(doc: dict, old_base: Path, new_base: Path) -> dict:
    """The document with relative references rewritten to resolve from ``new_base``."""

    def move(ref: str) -> str:
        if Path(ref).expanduser().is_absolute():
            return ref
        return Path(os.path.relpath(resolve(old_base, ref), new_base.resolve())).as_posix()

    return map_refs(doc, move)
