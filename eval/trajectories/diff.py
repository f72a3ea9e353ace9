"""Where two engine requests differ, in words and a short diff.

Requests are compared after ``trajectory.normalized`` (mol's tool call ids numbered), field
by field in the order a reader looks for the cause: the adapter, then the first message
that differs (its role and a line diff of its text), the tool list, the parameters, the
routing constraint.
"""

from __future__ import annotations

import difflib
from typing import Any

from mol.eval.trajectories.format import dumps, normalized

MAX_DIFF_LINES = 12
MAX_LINE = 160


def hop_of(request: dict[str, Any], artifact: Any) -> str:
    """The hop a request serves, judged from the request itself."""
    from mol.runtime import DEFAULT_SUMMARY_PROMPT

    if request.get("choices"):
        return "route"
    messages = request.get("messages") or [{}]
    summary = artifact.prompt("summary.prompt") or DEFAULT_SUMMARY_PROMPT
    first, last = messages[0].get("content") or "", messages[-1]
    # The prompt opens the request (``input = "text"``, the identity may follow it) or is
    # its last user message (``input = "trace"``).
    if (messages[0].get("role") == "system" and first.startswith(summary)) or (
            last.get("role") == "user" and last.get("content") == summary):
        return "summary"
    return "answer"


def request_difference(recorded: dict[str, Any],
                       replayed: dict[str, Any]) -> tuple[str, str] | None:
    """``(where, diff)`` for the first difference between two requests, or None."""
    a, b = normalized(recorded), normalized(replayed)
    if dumps(a) == dumps(b):
        return None
    if a.get("adapter") != b.get("adapter"):
        return "adapter", f"recorded {a.get('adapter')!r}, replay {b.get('adapter')!r}"
    left, right = a.get("messages") or [], b.get("messages") or []
    for index, (x, y) in enumerate(zip(left, right, strict=False)):
        if dumps(x) != dumps(y):
            return f"messages[{index}] ({y.get('role') or x.get('role')})", message_diff(x, y)
    if len(left) != len(right):
        return (f"messages[{min(len(left), len(right))}]",
                f"recorded {len(left)} messages, replay {len(right)}")
    if dumps(a.get("tools")) != dumps(b.get("tools")):
        return "tools", _tools_diff(a.get("tools") or [], b.get("tools") or [])
    for key in ("params", "choices"):
        if dumps(a.get(key)) != dumps(b.get(key)):
            return key, f"recorded {dumps(a.get(key))[:200]}, replay {dumps(b.get(key))[:200]}"
    extra = sorted(set(a) ^ set(b))
    return "request", f"fields differ: {extra}"


def message_diff(recorded: dict[str, Any], replayed: dict[str, Any]) -> str:
    """A short unified diff of two messages (their text, else their JSON)."""
    if isinstance(recorded.get("content"), str) and isinstance(replayed.get("content"), str) \
            and recorded.get("content") != replayed.get("content"):
        return text_diff(recorded["content"], replayed["content"])
    return text_diff(dumps(recorded), dumps(replayed))


def text_diff(old: str, new: str) -> str:
    """At most ``MAX_DIFF_LINES`` lines of a unified diff (one line of context); a single
    long line is shown around its first differing character."""
    if "\n" not in old and "\n" not in new:
        at = next((i for i, (x, y) in enumerate(zip(old, new, strict=False)) if x != y),
                  min(len(old), len(new)))
        start = max(0, at - 40)
        return (f"- ...{old[start:start + MAX_LINE]}\n"
                f"+ ...{new[start:start + MAX_LINE]}")
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), "recorded", "replay",
                                      n=1, lineterm=""))[2:]
    shown = [line[:MAX_LINE] for line in lines[:MAX_DIFF_LINES]]
    if len(lines) > MAX_DIFF_LINES:
        shown.append(f"... {len(lines) - MAX_DIFF_LINES} more lines")
    return "\n".join(shown)


def _tools_diff(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> str:
    def names(specs: list[dict[str, Any]]) -> dict[str, str]:
        return {(s.get("function") or {}).get("name", "?"): dumps(s) for s in specs}

    before, after = names(old), names(new)
    parts = [f"+{n}" for n in sorted(set(after) - set(before))]
    parts += [f"-{n}" for n in sorted(set(before) - set(after))]
    parts += [f"~{n}" for n in sorted(set(before) & set(after)) if before[n] != after[n]]
    return " ".join(parts) or "the order of the tools changed"
