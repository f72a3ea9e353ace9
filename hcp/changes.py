"""Compare artifacts and derive new ones: ``diff`` and RFC 6902 JSON Patch.

A patch applies to the document as written (file references as paths); the
result is validated like any artifact and records its origin in ``parent``.
The key paths a patch or diff touches name the slice of tasks to re-run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonpatch
import jsonpointer
import tomli_w

from mol.core.errors import HCPError
from mol.hcp import files as hcp_files
from mol.hcp.issues import Issue
from mol.hcp.loader import Artifact, load_dict


@dataclass(frozen=True)
class Change:
    """One difference between two artifacts."""

    path: str
    """Key path, e.g. ``adapters.L2.params.temperature``."""
    old: Any
    """Value in the first artifact (``None`` when added)."""
    new: Any
    """Value in the second artifact (``None`` when removed)."""
    file: str | None = None
    """For a referenced file whose content changed: its path as written in the second artifact."""

    def __str__(self) -> str:
        if self.file is not None:
            return f"~ {self.path}: file {self.file} changed"
        if self.old is None:
            return f"+ {self.path} = {json.dumps(self.new)}"
        if self.new is None:
            return f"- {self.path} (was {json.dumps(self.old)})"
        return f"~ {self.path}: {json.dumps(self.old)} -> {json.dumps(self.new)}"


def _comparable(artifact: Artifact) -> dict:
    """Full document (defaults included, bundles merged in) with files replaced by their
    digests, the digests of the skills its adapters use under ``$skills`` and what each
    bundle contributes under ``$bundles``."""
    form = hcp_files.substitute(artifact.doc.model_dump(mode="json"), artifact.files)
    form["$skills"] = dict(artifact.skill_digests)
    form["$bundles"] = {name: b.summary() for name, b in artifact.bundles.items()}
    return form


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict) and value:
        for key, inner in value.items():
            _flatten(inner, f"{prefix}.{key}" if prefix else key, out)
    elif isinstance(value, list) and any(isinstance(v, dict) for v in value):
        for index, inner in enumerate(value):
            _flatten(inner, f"{prefix}[{index}]", out)
    else:
        out[prefix] = value


def diff(a: Artifact, b: Artifact) -> list[Change]:
    """Key paths whose meaning differs between ``a`` and ``b``, including changed files."""
    flat_a: dict[str, Any] = {}
    flat_b: dict[str, Any] = {}
    _flatten(_comparable(a), "", flat_a)
    _flatten(_comparable(b), "", flat_b)
    names = {digest: ref for ref, digest in a.files.items()}
    names.update({digest: ref for ref, digest in b.files.items()})
    changes = []
    for path in sorted(flat_a.keys() | flat_b.keys()):
        old, new = flat_a.get(path), flat_b.get(path)
        if old == new:
            continue
        file = names.get(new) if isinstance(new, str) and isinstance(old, str) else None
        if _same_length_lists(old, new) and any(v in names for v in new):
            # e.g. skills.paths: report each folder whose content changed
            changes += [Change(f"{path}[{i}]", o, n, file=names.get(n, n))
                        for i, (o, n) in enumerate(zip(old, new, strict=True)) if o != n]
        elif file is not None and old in names:
            changes.append(Change(path, names[old], file, file=file))
        elif path.startswith("$skills.") and old is not None and new is not None:
            skill = path.removeprefix("$skills.")
            changes.append(Change(f"skills.{skill}", old, new, file=f"skill {skill}"))
        elif path.startswith("$bundles."):
            command = path.partition(".commands.")[2]
            both = old is not None and new is not None
            changes.append(Change(path[1:], old, new,
                                  file=f"command /{command}" if command and both else None))
        else:
            changes.append(Change(path, old, new))
    return changes


def _same_length_lists(old: Any, new: Any) -> bool:
    return isinstance(old, list) and isinstance(new, list) and len(old) == len(new)


def apply_patch(artifact: Artifact, patch: Any) -> Artifact:
    """Apply an RFC 6902 JSON Patch; return the new validated artifact (``parent`` = old digest)."""
    doc = dict(patch_document(artifact.raw, patch))
    doc["parent"] = artifact.digest
    file = f"{artifact.path or '<artifact>'} + patch"
    return load_dict(doc, base_dir=artifact.base_dir, file=file, path=None)


def patch_document(doc: Any, patch: Any) -> Any:
    """``doc`` with an RFC 6902 JSON Patch applied (``doc`` itself is left as it is); an
    ``HCPError`` names the operation that does not apply."""
    if not isinstance(patch, list):
        raise HCPError([Issue("a JSON Patch must be a JSON array of operations")])
    for index, op in enumerate(patch):
        where = f"patch operation {index}"
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise HCPError([Issue(f"{where}: needs an object with 'op' and 'path'")])
        try:
            doc = jsonpatch.apply_patch(doc, [op])
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
            raise HCPError([Issue(f"{where} ({op.get('op')} {op.get('path')}): {exc}")]) from None
        except (TypeError, KeyError, IndexError, AttributeError) as exc:
            raise HCPError([Issue(f"{where} ({op.get('op')} {op.get('path')}): cannot apply "
                                  f"({type(exc).__name__}: {exc})")]) from None
    return doc


def to_toml(artifact: Artifact, out_dir: Path | None = None) -> str:
    """The artifact as TOML; file references rewritten to resolve from ``out_dir``."""
    doc = artifact.raw
    if out_dir is not None:
        doc = hcp_files.rebase(doc, artifact.base_dir, out_dir)
    return toml_text(doc)


def toml_text(doc: dict) -> str:
    """A document as TOML, ``schema_version``, ``name`` and ``parent`` first (they say
    what the document is)."""
    head = {k: doc[k] for k in ("schema_version", "name", "parent") if k in doc}
    rest = {k: v for k, v in doc.items() if k not in head}
    return tomli_w.dumps({**head, **rest})
