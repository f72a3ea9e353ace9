"""Find the line of a key path in TOML source text.

``tomllib`` reports positions only for syntax errors. For validation errors we
scan the source for table headers and ``key =`` lines, which covers how people
write HCP files; a key inside an inline table maps to the line of its table.
The answer is a hint for humans, so a miss just means no line is shown.
"""

from __future__ import annotations

import re

_PART = r'(?:[A-Za-z0-9_-]+|"[^"]*"|\'[^\']*\')'
_DOTTED = rf"{_PART}(?:\s*\.\s*{_PART})*"
_HEADER = re.compile(rf"^\s*(\[\[?)\s*({_DOTTED})\s*\]\]?\s*(?:#.*)?$")
_KEY = re.compile(rf"^\s*({_DOTTED})\s*=")
_PART_RE = re.compile(_PART)


def _split(dotted: str) -> tuple[str, ...]:
    return tuple(p.strip("\"'") for p in _PART_RE.findall(dotted))


def key_lines(text: str) -> dict[tuple, int]:
    """Map every table and key path written in ``text`` to its 1-based line."""
    lines: dict[tuple, int] = {}
    table: tuple = ()
    array_counts: dict[tuple, int] = {}
    in_multiline = False
    for number, line in enumerate(text.splitlines(), start=1):
        # Skip the inside of multi-line strings, where "x = y" is just text.
        quotes = line.count('"""') + line.count("'''")
        if in_multiline:
            in_multiline = quotes % 2 == 0
            continue
        if header := _HEADER.match(line):
            path = _split(header.group(2))
            if header.group(1) == "[[":
                index = array_counts.get(path, -1) + 1
                array_counts[path] = index
                table = (*path, index)
            else:
                table = path
            lines.setdefault(table, number)
        elif key := _KEY.match(line):
            lines.setdefault((*table, *_split(key.group(1))), number)
        if quotes % 2 == 1:
            in_multiline = True
    return lines


def line_of(lines: dict[tuple, int], loc: tuple) -> int | None:
    """The line of the longest prefix of ``loc`` found in ``lines``."""
    for end in range(len(loc), 0, -1):
        if (found := lines.get(tuple(loc[:end]))) is not None:
            return found
    return None
