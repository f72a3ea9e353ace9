"""One problem found in an HCP artifact (``Issue``, defined with the error tree in
``mol.core.errors``), and how key paths are written."""

from __future__ import annotations

import json
import re

from mol.core.errors import Issue

_BARE = re.compile(r"[A-Za-z0-9_-]+")
"""A TOML bare key; any other key is written quoted, as TOML writes it."""

__all__ = ["Issue", "format_path"]


def format_path(loc: tuple) -> str:
    """Render a location tuple as a key path: ``("a", "b", 3)`` -> ``a.b[3]``; a key that
    is empty or holds a dot, a space... quoted (``("a", "")`` -> ``a.""``)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            key = str(part) if _BARE.fullmatch(str(part)) else json.dumps(str(part),
                                                                          ensure_ascii=False)
            out += f".{key}" if out else key
    return out
