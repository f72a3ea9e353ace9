"""The HCP artifact (Harness Context Protocol): schema, loader, digest, diff and patch.

The public entry points are re-exported lazily so that ``import mol.hcp`` stays
cheap (pydantic is imported only when a loader or model is first used).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mol.hcp.loader import Artifact, load, load_text

__all__ = ["Artifact", "load", "load_text"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from mol.hcp import loader

        return getattr(loader, name)
    raise AttributeError(f"module 'mol.hcp' has no attribute {name!r}")
