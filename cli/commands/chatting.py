"""``mol chat``'s own commands and its context gauge.

``/help``, ``/compact [instructions]``, ``/clear`` and ``/context`` (``mol.hcp.slash.
BUILTIN_COMMANDS``) run here, never reach a model, and win over a bundle's command of
the same name (still callable as ``/bundle:name``). After each answer, a line on stderr
says how much of the answering adapter's context window its view takes.
"""

from __future__ import annotations

import sys
from typing import Any

from mol.core.text import escaped


def builtin(line: str) -> tuple[str, str] | None:
    """``(name, rest)`` when ``line`` calls one of ``mol chat``'s own commands."""
    from mol.hcp.slash import BUILTIN_COMMANDS

    head, _, rest = line.strip().partition(" ")
    name = head[1:] if head.startswith("/") else ""
    return (name, rest.strip()) if name in BUILTIN_COMMANDS else None


async def run_builtin(name: str, rest: str, session: Any, artifact: Any) -> None:
    """Run one of the built-in commands, printing what it did."""
    if name == "help":
        _help(artifact)
    elif name == "compact":
        done = await session.compact(None, rest)
        for event in done:
            print(f"[mol] compacted {event.adapter}: about {event.tokens_before} -> "
                  f"{event.tokens_after} tokens", file=sys.stderr, flush=True)
        if not done:
            print("[mol] nothing to compact (every view is short, or a PreCompact hook kept "
                  "it)", file=sys.stderr, flush=True)
    elif name == "clear":
        session.restart()
        print(f"[mol] new conversation {session.conversation.id}", file=sys.stderr, flush=True)
    elif name == "context":
        used = await context_use(session)
        for adapter, (tokens, window) in used.items():
            print(f"[mol] {adapter}: about {tokens} of {window} tokens "
                  f"({tokens / window:.0%})", file=sys.stderr, flush=True)
        if not used:
            print("[mol] no adapter has answered yet", file=sys.stderr, flush=True)


def _help(artifact: Any) -> None:
    from mol.hcp.slash import BUILTIN_COMMANDS

    lines = [f"/{name:<9} {what}" for name, what in BUILTIN_COMMANDS.items()]
    commands = getattr(artifact, "commands", None) or {}
    for key, command in sorted(commands.items()):
        if key == command.qualified:  # each command once, by its unambiguous name
            about = (getattr(command, "description", "") or "").splitlines()
            lines.append(f"/{key}  {escaped(about[0] if about else '')}")
    print("\n".join(lines), file=sys.stderr, flush=True)


async def context_use(session: Any) -> dict[str, tuple[int, int]]:
    """Adapter -> (tokens its view takes, about; its window), for adapters with a view."""
    from mol.runtime.compaction import size_of

    used = {}
    for adapter in session.artifact.doc.adapter_names:
        if session.conversation.views.get(adapter):
            view = session.conversation.engine_view(adapter)
            used[adapter] = (size_of(session, adapter, view, None),
                             await session.runtime.windows.of(adapter))
    return used


async def gauge(session: Any, adapter: str) -> None:
    """One line on stderr: how much of ``adapter``'s window its view takes now."""
    if not adapter:
        return
    used = await context_use(session)
    if adapter in used:
        tokens, window = used[adapter]
        print(f"[mol] {adapter} context: {tokens / window:.0%} ({tokens} of {window} tokens)",
              file=sys.stderr, flush=True)
