"""Content addresses: ``sha256:<hex>`` of files, folders and canonical JSON."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def canonical_json(value: Any) -> bytes:
    """JSON with sorted keys and no insignificant whitespace: one text per meaning."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def digest_value(value: Any) -> str:
    """Digest of a JSON-able value's canonical form."""
    return _sha256(canonical_json(value))


def digest_file(path: Path) -> str:
    """Digest of a file's bytes."""
    return _sha256(path.read_bytes())


def digest_tree(folder: Path) -> str:
    """Digest of a folder: its regular files' relative paths and digests, sorted, and its
    symbolic links' relative paths and targets.

    Renaming, adding, removing or editing any file changes it, and so does pointing a link
    elsewhere; the folder's own location and timestamps do not.
    """
    entries: list[tuple[str, ...]] = []
    for path in folder.rglob("*"):
        if "__pycache__" in path.parts:
            continue
        relative = path.relative_to(folder).as_posix()
        if path.is_symlink():
            entries.append(("link", relative, os.readlink(path)))
        if path.is_file():
            entries.append((relative, digest_file(path)))
    return digest_value(sorted(entries))
