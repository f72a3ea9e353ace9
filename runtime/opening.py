"""What happens to a turn before it is routed: slash commands and the first hook events.

1. A turn ``/name args`` naming one of the artifact's slash commands becomes the
   command's expanded prompt; the command's ``allowed-tools`` narrow the
   turn's tools, and only the adapters that use the command's bundle may answer.
2. ``SessionStart`` runs before a runtime's first turn; its context is kept for
   every adapter's next turn.
3. ``UserPromptSubmit`` runs on the (expanded) prompt: it may block the turn or
   add context to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mol.runtime import lifecycle
from mol.runtime.hooks import HookSet


@dataclass
class Opening:
    """How a turn starts."""

    text: str
    """The prompt, expanded when it invoked a slash command."""
    command: str = ""
    """The slash command invoked (``bundle:name``), if any."""
    narrow: list[str] | None = None
    """Tool-name patterns the turn is narrowed to (a command's ``allowed-tools``)."""
    labels: list[str] | None = None
    """The adapters that may answer (a command's bundle's users); None: any."""
    context: list[str] = field(default_factory=list)
    """Context hooks added for this turn."""
    blocked: str | None = None
    """Why a ``UserPromptSubmit`` hook blocked the turn."""


def command_of(artifact: Any, text: str) -> Opening:
    """The turn, expanded when it starts with one of the artifact's slash commands."""
    commands = getattr(artifact, "commands", None)
    if not commands or not text.lstrip().startswith("/"):
        return Opening(text)
    from mol.hcp.expand import bundle_users
    from mol.hcp.slash import invocation

    call = invocation(text)
    command = commands.get(call[0]) if call else None
    if command is None:
        return Opening(text)
    return Opening(command.expand(call[1]), command=command.qualified,
                   narrow=list(command.allowed_tools) or None,
                   labels=bundle_users(artifact.doc).get(command.bundle) or None)


async def prepare(artifact: Any, conversation: Any, sets: list[HookSet], text: str,
                  emit: lifecycle.Emit, first: bool) -> Opening:
    """Expand a slash command, run ``SessionStart`` (when ``first``) and
    ``UserPromptSubmit``."""
    opening = command_of(artifact, text)
    if first:
        started = await lifecycle.session_start(sets, conversation.id,
                                                bool(conversation.turns), emit)
        if started.context:
            from mol.hcp.expand import adapter_configs

            for adapter in adapter_configs(artifact.doc):
                conversation.notes.setdefault(adapter, []).extend(started.context)
    submitted = await lifecycle.prompt_submit(sets, conversation.id, opening.text, emit)
    opening.blocked = submitted.blocked
    opening.context += submitted.context
    return opening
