"""Model and tool text as an editor shows it to a person: titles that cannot hide what they
name, output fenced as code."""

from __future__ import annotations

import json
import re

from mol.core.text import escaped

TITLE_CHARS = 400
"""Characters of a title before it says how many more there are (the whole call travels
beside it, as ``rawInput`` and, for a permission, as content)."""


def title_text(text: str) -> str:
    """One printable line: control characters and newlines escaped, the length capped with a
    note of what was left out, so padding cannot push part of a command out of sight
    without the title saying so."""
    line = escaped(text).replace("\n", "\\n").replace("\t", " ")
    if len(line) <= TITLE_CHARS:
        return line
    return f"{line[:TITLE_CHARS]}… ({len(line) - TITLE_CHARS} more characters)"


def fenced(text: str, language: str = "") -> str:
    """``text`` as a Markdown code block, its fence longer than any run of backticks in it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def call_text(name: str, arguments: object) -> str:
    """A complete call for a person to approve: the tool and every argument, as indented
    JSON with every non-ASCII and control character escaped (nothing can hide in it)."""
    body = json.dumps(arguments, indent=2, ensure_ascii=True)
    return f"{escaped(name)} with\n{fenced(body, 'json')}"
