"""Model and tool text made safe to show a person, on a terminal or in an editor.

Text from a model, a tool or a server may carry characters that act on a terminal (clear
the screen, set the title, write the clipboard through OSC 52) or reorder what is read
(bidirectional overrides): ``escaped`` shows each of them as an escape instead.
"""

from __future__ import annotations

import re

UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
"""Characters a terminal acts on, or that reorder text: C0 controls but tab and newline,
DEL, C1 controls, and the bidirectional overrides and isolates."""


def escaped(text: str) -> str:
    """``text`` with every character of ``UNSAFE`` shown as an escape (``\\x1b``,
    ``\\u202e``); CRLF line ends become plain newlines."""
    return UNSAFE.sub(_escape, text.replace("\r\n", "\n"))


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
