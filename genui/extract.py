"""Where generated UI sits in an answer, or in the ``render_ui`` tool's arguments.

In an answer:

- a fenced block whose info string is ``ui4a/tsx`` is one UI4A TSX module;
- a fenced block whose info string is ``a2ui`` (or ``a2ui/jsonl``, ``a2ui/json``), or the
  A2UI SDK's ``<a2ui-json>…</a2ui-json>`` tags, holds A2UI messages; all of an answer's A2UI
  blocks form one stream, in order;
- an answer that is nothing but A2UI messages (JSON lines, or a JSON list) is one stream.

In ``render_ui`` arguments (the macaron-artifacts tool contract): ``{"code": "<TSX>"}``, or
``{"a2ui": [messages]}`` (a list of messages, or the JSON lines as one string).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from mol.genui.report import Kind

FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})\s*(?P<info>[^\s`]*)")
A2UI_TAGS = re.compile(r"<a2ui-json>(?P<body>.*?)</a2ui-json>", re.S)
A2UI_INFO = ("a2ui", "a2ui/jsonl", "a2ui/json")
MESSAGE_KEYS = ("createSurface", "updateComponents", "updateDataModel", "deleteSurface")


@dataclass(frozen=True)
class Block:
    """One piece of UI: its kind, its text, and the answer line its text starts on."""

    kind: Kind
    text: str
    first_line: int = 1


def blocks(answer: str) -> list[Block]:
    """Every UI block of an answer, in order (A2UI blocks are combined by the checker)."""
    found = _fenced(answer) + _tagged(answer)
    if not found and _is_stream(answer):
        found = [Block("a2ui", answer, 1)]
    return sorted(found, key=lambda block: block.first_line)


def _fenced(answer: str) -> list[Block]:
    found: list[Block] = []
    lines = answer.splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence, info = opening.group("fence"), opening.group("info").lower()
        end = index + 1
        while end < len(lines) and not _closes(lines[end], fence):
            end += 1
        kind: Kind | None = "tsx" if info == "ui4a/tsx" else "a2ui" if info in A2UI_INFO else None
        if kind is not None:
            found.append(Block(kind, "\n".join(lines[index + 1:end]), index + 2))
        index = end + 1
    return found


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return stripped.startswith(fence) and set(stripped) == {fence[0]}


def _tagged(answer: str) -> list[Block]:
    return [Block("a2ui", match.group("body"), answer[: match.start("body")].count("\n") + 1)
            for match in A2UI_TAGS.finditer(answer)]


def _is_stream(answer: str) -> bool:
    """Whether the whole answer is A2UI messages (a JSON object or list naming a message)."""
    text = answer.strip()
    if not text or text[0] not in "{[":
        return False
    head = text[:2000]
    return '"version"' in head and any(f'"{key}"' in head for key in MESSAGE_KEYS)


def tool_blocks(arguments: dict[str, Any]) -> list[Block]:
    """The UI in ``render_ui`` arguments, or ``ValueError`` saying what the tool takes."""
    code, a2ui = arguments.get("code"), arguments.get("a2ui")
    if (code is None) == (a2ui is None):
        raise ValueError("give exactly one of 'code' (a UI4A TSX module) or 'a2ui' "
                         "(a list of A2UI messages)")
    if code is not None:
        if not isinstance(code, str) or not code.strip():
            raise ValueError("'code' must be the TSX module as a non-empty string")
        return [Block("tsx", code)]
    if isinstance(a2ui, str):
        return [Block("a2ui", a2ui)]
    if isinstance(a2ui, list):
        return [Block("a2ui", "\n".join(json.dumps(m, ensure_ascii=False) for m in a2ui))]
    raise ValueError("'a2ui' must be a list of A2UI messages or their JSON lines as a string")
