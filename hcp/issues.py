"""One problem found in an HCP artifact, located as precisely as mol can."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Issue:
    """A single problem: where it is (file, line, key path) and what is wrong."""

    message: str
    file: str | None = None
    line: int | None = None
    path: str = ""
    """Key path in the document, e.g. ``adapters.L2.tools.allow[3]``."""
    hint: str | None = None
    """A suggestion, e.g. the closest valid key for a typo."""

    def __str__(self) -> str:
        where = self.file or "<artifact>"
        if self.line is not None:
            where += f":{self.line}"
        text = f"{where}: "
        if self.path:
            text += f"{self.path}: "
        text += self.message
        if self.hint:
            text += f" ({self.hint})"
        return text


def format_path(loc: tuple) -> str:
    """Render a location tuple as a key path: ``("a", "b", 3)`` -> ``a.b[3]``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out
