"""Adapter descriptions kept in a markdown file, in the form the reference MoL proxy's
``lora.md`` uses (``router.descriptions``)::

    ## L2

    adapter_name: L2

    ### Description

    What L2 is for, over as many lines as needed.

A ``## NAME`` heading opens an adapter's section; its ``### Description`` subsection (up to
the next heading) is the description, trimmed; an ``adapter_name:`` line before it names the
engine's LoRA. The router prompt's ``{{ADAPTER_DESCRIPTIONS}}`` puts each description on one
line, so line breaks inside one do not matter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SECTION = re.compile(r"^##\s+([A-Za-z][A-Za-z0-9_-]{0,31})\s*$")
_ENGINE_NAME = re.compile(r"^adapter_name:\s*(\S+)\s*$")
_DESCRIPTION = "### Description"
_HEADING = re.compile(r"^#{1,6}\s")


@dataclass(frozen=True)
class Described:
    """One adapter's section: its description and the engine name it gives (if any)."""

    description: str
    engine_name: str | None
    line: int
    """The line of its ``## NAME`` heading (1-based)."""


def parse(text: str) -> tuple[dict[str, Described], list[tuple[int, str]]]:
    """The sections of a descriptions file by adapter name, and its problems as ``(line,
    message)``: no section at all, a name given twice, a section without a description."""
    found: dict[str, Described] = {}
    problems: list[tuple[int, str]] = []
    for name, line, body in _sections(text):
        if name in found:
            problems.append((line, f"adapter {name} is described twice (first on line "
                                   f"{found[name].line})"))
            continue
        engine_name, description = _read(body)
        if not description:
            problems.append((line, f"section ## {name} has no '{_DESCRIPTION}' text"))
        found[name] = Described(description, engine_name, line)
    if not found and not problems:
        problems.append((1, "no adapter section: expected headings such as '## L0'"))
    return found, problems


def _sections(text: str) -> list[tuple[str, int, list[str]]]:
    sections: list[tuple[str, int, list[str]]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        match = _SECTION.match(raw.strip())
        if match:
            sections.append((match.group(1), number, []))
        elif sections:
            sections[-1][2].append(raw.rstrip())
    return sections


def _read(body: list[str]) -> tuple[str | None, str]:
    engine_name: str | None = None
    inside = False
    kept: list[str] = []
    for raw in body:
        line = raw.strip()
        if line == _DESCRIPTION:
            inside = True
        elif inside and _HEADING.match(line):
            inside = False
        elif inside:
            kept.append(raw)
        elif engine_name is None and _ENGINE_NAME.match(line):
            engine_name = _ENGINE_NAME.match(line).group(1)
    return engine_name, "\n".join(kept).strip()
