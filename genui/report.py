"""What a check says about one piece of generated UI: its problems, each with a location.

A ``Problem`` names where (a line and column of a TSX module, or a line of an
A2UI stream and the JSON pointer inside that message) and what was expected;
a ``Checked`` is one UI (an A2UI stream or a TSX module) with its problems.
Both are plain data: the harness puts them in events, the server in replies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["a2ui", "tsx"]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a UI, located precisely enough to fix it."""

    where: str
    """``line 3, column 7`` (TSX), or ``line 2 /updateComponents/components/1/child``
    (A2UI: the line of the message, then the JSON pointer inside it)."""
    message: str
    """What is wrong and what was expected."""
    rule: str
    """A stable name for the kind of problem: ``json``, ``schema``, ``version``,
    ``unknown-component``, ``dangling-child``, ``missing-data``, ``surface``, ``syntax``,
    ``type``, ``import``, ``forbidden``, ``export``."""

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"

    def to_dict(self) -> dict[str, str]:
        """The JSON-able form: ``where``, ``message``, ``rule``."""
        return {"where": self.where, "message": self.message, "rule": self.rule}


@dataclass
class Checked:
    """One UI and what the checker found in it."""

    kind: Kind
    source: str
    """The UI as the model wrote it: A2UI messages (JSON lines or a JSON list) or TSX."""
    origin: str = "answer"
    """``answer`` (a block of the answer text) or ``render_ui`` (the tool's arguments)."""
    problems: list[Problem] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    """The parsed A2UI messages (empty for TSX)."""
    version: str | None = None
    """The A2UI version the stream declares (``v0.9``, ``v1.0``)."""
    compiled: str | None = None
    """The TSX module compiled to an ES module for the preview (valid modules only)."""

    @property
    def valid(self) -> bool:
        """True when the checker found nothing wrong."""
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        """What clients receive: the UI itself (messages or code) and the verdict."""
        data: dict[str, Any] = {"kind": self.kind, "valid": self.valid, "origin": self.origin}
        if self.kind == "a2ui":
            data.update(version=self.version, messages=self.messages)
        else:
            data["code"] = self.source
        data["problems"] = [p.to_dict() for p in self.problems]
        return data

    def summary(self, limit: int = 20) -> str:
        """The problems as lines for the model to read (at most ``limit``)."""
        lines = [f"- {p}" for p in self.problems[:limit]]
        if len(self.problems) > limit:
            lines.append(f"- ... and {len(self.problems) - limit} more")
        return "\n".join(lines)
