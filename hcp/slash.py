"""Slash commands: Claude Code's ``commands/*.md`` prompt templates.

A command file is Markdown with optional YAML front matter (``description``,
``allowed-tools``, ``argument-hint``; other fields are kept and reported). A
turn ``/name args`` expands the body: ``$ARGUMENTS`` is the whole argument
text, ``$1``..``$9`` its words (split like a shell would), and
``${CLAUDE_PLUGIN_ROOT}`` the bundle's folder. A body that uses none of the
argument placeholders gets the arguments appended, as Claude Code does.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mol.hcp.claude import Translation, allowed_tools, replace_roots

KNOWN_FIELDS = ("description", "allowed-tools", "argument-hint")
"""Front-matter fields mol uses."""

BUILTIN_COMMANDS = {
    "help": "the built-in commands and the artifact's slash commands",
    "compact": "compact every adapter's view now; the rest of the line is added to the "
               "compaction's instructions",
    "clear": "start a new conversation",
    "context": "how much of each adapter's context window its view takes",
}
"""``mol chat``'s own commands: they win over a bundle's command of the same name (which
stays callable as ``/bundle:name``; the artifact warns of it when it loads)."""

_INVOCATION = re.compile(r"^/([A-Za-z0-9][A-Za-z0-9_.:-]*)(?:\s+(.*))?$", re.DOTALL)
_PLACEHOLDER = re.compile(r"\$(ARGUMENTS|[1-9])(?![0-9A-Za-z_])")
_SHELL_LINE = re.compile(r"!`[^`]+`")
_FILE_REFERENCE = re.compile(r"(?:^|\s)@[\w./-]+")


@dataclass(frozen=True)
class SlashCommand:
    """A prompt template a turn ``/name args`` expands."""

    name: str
    """The file's name without ``.md``."""
    bundle: str
    """The bundle it came from."""
    file: Path
    template: str
    """The body (the file without its front matter)."""
    root: Path
    """The bundle's folder, for ``${CLAUDE_PLUGIN_ROOT}``."""
    description: str = ""
    argument_hint: str = ""
    allowed_tools: tuple[str, ...] = ()
    """mol tool-name patterns the turn is narrowed to (empty: not narrowed)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Front-matter fields mol does not use, kept as parsed."""

    @property
    def qualified(self) -> str:
        """``bundle:name``, the form that is never ambiguous."""
        return f"{self.bundle}:{self.name}"

    def expand(self, arguments: str) -> str:
        """The prompt of ``/name arguments``."""
        arguments = arguments.strip()
        try:
            words = shlex.split(arguments)
        except ValueError:
            words = arguments.split()
        used = bool(_PLACEHOLDER.search(self.template))

        def value(match: re.Match[str]) -> str:
            key = match.group(1)
            if key == "ARGUMENTS":
                return arguments
            index = int(key) - 1
            return words[index] if index < len(words) else ""

        text = _PLACEHOLDER.sub(value, self.template)
        text = replace_roots(text, {"CLAUDE_PLUGIN_ROOT": str(self.root)})
        if arguments and not used:
            text = text.rstrip("\n") + f"\n\nARGUMENTS: {arguments}\n"
        return text


def invocation(text: str) -> tuple[str, str] | None:
    """``(name, arguments)`` of a turn that starts with ``/name``, else None."""
    match = _INVOCATION.match(text.strip())
    if match is None:
        return None
    return match.group(1), match.group(2) or ""


def parse(file: Path, bundle: str, root: Path) -> Translation:
    """Read the command ``file``: the value is a ``SlashCommand``, or None with problems."""
    from mol.core.errors import SkillError
    from mol.skills.loader import parse_front_matter, split_front_matter

    out = Translation()
    where = str(file)
    try:
        text = file.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        out.problems.append(f"{where}: cannot read as UTF-8 text: {exc}")
        return out
    data: dict[str, Any] = {}
    body = text
    if text.removeprefix("\ufeff").startswith("---"):
        try:
            front, body = split_front_matter(text, where)
            data = parse_front_matter(front, where)
        except SkillError as exc:
            out.problems.append(str(exc))
            return out
    tools = data.get("allowed-tools") or []
    if isinstance(tools, str):
        # "Read, Bash(git add:*)" or "Read Bash(git add:*)": split outside parentheses
        tools = [t for t in re.split(r"[,\s]+(?![^()]*\))", tools) if t]
    if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
        out.problems.append(f"{where}: allowed-tools: must be a string or a list of strings")
        return out
    narrowed = allowed_tools(tools, f"{where}: allowed-tools")
    out.notes += narrowed.notes
    out.notes += [f"{where}: {key}: front-matter field not used by mol (kept)"
                  for key in data if key not in KNOWN_FIELDS]
    if _SHELL_LINE.search(body):
        out.notes.append(f"{where}: !`...` lines are not run by mol; they stay in the text")
    if _FILE_REFERENCE.search(body):
        out.notes.append(f"{where}: @file references are not read by mol; they stay in the text")
    out.value = SlashCommand(
        name=file.stem, bundle=bundle, file=file, template=body, root=root,
        description=str(data.get("description") or ""),
        argument_hint=str(data.get("argument-hint") or ""), allowed_tools=tuple(narrowed.value),
        extra={k: v for k, v in data.items() if k not in KNOWN_FIELDS})
    return out
