"""One problem found in an HCP artifact (``Issue``, defined with the error tree in
``mol.core.errors``), and how key paths are written."""

from __future__ import annotations

from mol.core.errors import Issue

__all__ = ["Issue", "format_path"]


def format_path(loc: tuple) -> str:
    """Render a location tuple as a key path: ``("a", "b", 3)`` -> ``a.b[3]``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out
