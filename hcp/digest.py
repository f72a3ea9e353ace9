"""Content addresses: ``sha256:<hex>`` of files, folders and canonical JSON."""

from __future__ import annotations

import hashlib
import json
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
    """Digest of a folder: its regular files' relative paths and digests, sorted.

    Renaming, adding, removing or editing any file changes it; the folder's own
    location and timestamps do not.
    """
    entries = sorted(
        (path.relative_to(folder).as_posix(), digest_file(path))
        for path in folder.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    )
    return digest_value(entries)
