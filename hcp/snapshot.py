"""A self-contained copy of an artifact: its TOML and every file it names, in one folder.

``entries(artifact)`` lists the copy as ``(relative path, bytes, mode)``: ``hcp.toml``
first, then each referenced prompt, hook script and skill folder under ``files/``, with
the references in the TOML rewritten to point there. ``write(artifact, folder)`` puts them
on disk. Files enter an artifact's digest by content, never by path, so the copy loads with
the same digest (``tests/hcp/test_snapshot.py``): an eval run keeps the HCP it ran under
even when the original files change later, and the copy can travel to another machine.
Built-in skills are not copied (they come with mol).
"""

from __future__ import annotations

import os
from pathlib import Path

from mol.hcp.changes import toml_text
from mol.hcp.files import map_refs
from mol.hcp.loader import Artifact, load

TOML = "hcp.toml"
"""Name of the document in a snapshot."""

Entry = tuple[str, bytes, int]


def entries(artifact: Artifact) -> list[Entry]:
    """The snapshot of ``artifact``: the rewritten TOML, then every file it names."""
    names: dict[str, str] = {}
    out: list[Entry] = []
    for index, ref in enumerate(sorted(artifact.files)):
        source = artifact.resolve(ref)
        name = f"files/{index}-{source.name or 'root'}"
        names[ref] = name
        if source.is_dir():
            out += folder_entries(source, f"{name}/")
        else:
            out.append((name, source.read_bytes(), source.stat().st_mode & 0o777))
    # A LoRA is not copied (weights are large, and the engine reads them where they are):
    # the copy names it by absolute path, with its hash, so it loads anywhere.
    raw = map_refs(artifact.raw, lambda ref: names.get(ref) or str(artifact.resolve(ref)))
    for name, config in (raw.get("adapters") or {}).items():
        lora = artifact.doc.adapters[name].lora if name in artifact.doc.adapters else None
        if isinstance(config, dict) and isinstance(config.get("lora"), dict) and lora:
            config["lora"]["sha256"] = lora.sha256
    return [(TOML, toml_text(raw).encode("utf-8"), 0o644), *out]


def folder_entries(folder: Path, prefix: str = "") -> list[Entry]:
    """Every file under ``folder`` (``__pycache__`` left out, as in its digest) as an entry
    named ``prefix`` + its relative path, with its permission bits."""
    return [(prefix + path.relative_to(folder).as_posix(), path.read_bytes(),
             path.stat().st_mode & 0o777)
            for path in sorted(folder.rglob("*"))
            if path.is_file() and "__pycache__" not in path.parts]


def write_entries(items: list[Entry], folder: Path) -> Path:
    """Write snapshot entries under ``folder``; returns the path of its ``hcp.toml``."""
    for relative, data, mode in items:
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        os.chmod(target, mode)
    return folder / TOML


def write(artifact: Artifact, folder: Path) -> Path:
    """Write the snapshot of ``artifact`` into ``folder``; returns its ``hcp.toml``."""
    return write_entries(entries(artifact), folder)


def load_snapshot(folder: Path) -> Artifact:
    """The artifact a snapshot folder holds."""
    return load(folder / TOML)
