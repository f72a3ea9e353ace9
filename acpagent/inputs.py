"""What the editor hands mol, read as mol takes it: a prompt's content blocks as the turn's
text, its MCP servers as the session's own, and the artifact's slash commands as the
commands the editor offers.

Content mol reads: text; links to resources (``resource_link``, as ``[@name](uri)``);
embedded text resources (``resource``: an open file, a selection), each as a ``<context
ref="URI">`` block after the text. Images, audio and binary resources are refused
(``promptCapabilities`` says so), naming the block.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from mol.acpagent import sdk
from mol.core.errors import ConversationError
from mol.hcp.base import SERVER_NAME

CLIENT_STARTUP_SEC = 60.0
"""How long an editor's MCP server may take to start (``startup_timeout_sec``): editors
often launch theirs with ``npx`` or ``uvx``, which may download the server first."""
BUILTIN = {"compact": "instructions for the compaction (optional)"}
"""``mol chat``'s own commands ``mol acp`` runs too (``mol.hcp.slash.BUILTIN_COMMANDS``),
with the hint of their input."""


def prompt_text(blocks: list[Any]) -> str:
    """The turn's text from a prompt's blocks (the SDK's models), in their order."""
    parts: list[str] = []
    for index, block in enumerate(blocks):
        where = f"prompt[{index}]"
        if block.type == "text":
            parts.append(block.text)
        elif block.type == "resource_link":
            parts.append(f"[@{block.name}]({block.uri})")
        elif block.type == "resource" and hasattr(block.resource, "text"):
            uri = block.resource.uri.replace('"', "%22")
            parts.append(f'\n<context ref="{uri}">\n{block.resource.text}\n</context>\n')
        elif block.type == "resource":
            raise ConversationError(f"{where}.resource: a binary resource ({block.resource.uri})"
                                    " is not supported; embed text", field=f"{where}.resource")
        else:
            raise ConversationError(f"{where}.type: {block.type} content is not supported "
                                    f"(promptCapabilities.{block.type} is false)",
                                    field=f"{where}.type")
    text = "".join(parts).strip()
    if not text:
        raise ConversationError("prompt: no text in the prompt", field="prompt")
    return text


def available_commands(artifact: Any) -> list[dict[str, Any]]:
    """The slash commands the editor offers: mol's own (``/compact``), then the artifact's,
    each by its short name unless another command has it (then ``bundle:name``)."""
    from mol.hcp.slash import BUILTIN_COMMANDS

    listed = [{"name": name, "description": BUILTIN_COMMANDS[name], "input": {"hint": hint}}
              for name, hint in BUILTIN.items()]
    commands = getattr(artifact, "commands", None) or {}
    for key, command in sorted(commands.items()):
        if key != command.qualified:
            continue  # each command once
        short = commands.get(command.name) is command and command.name not in BUILTIN
        entry: dict[str, Any] = {"name": command.name if short else command.qualified,
                                 "description": command.description or command.qualified}
        if command.argument_hint:
            entry["input"] = {"hint": command.argument_hint}
        listed.append(entry)
    return listed


def builtin(text: str) -> tuple[str, str] | None:
    """``(name, rest)`` when the turn calls one of mol's own commands."""
    head, _, rest = text.strip().partition(" ")
    name = head[1:] if head.startswith("/") else ""
    return (name, rest.strip()) if name in BUILTIN else None


def client_servers(raw: Any, cwd: str, declared: Collection[str]) -> dict[str, Any]:
    """The editor's MCP servers (``mcpServers``) as the session's own, by name
    (``MCPServerConfig``s); a ``ConversationError`` naming the entry at fault."""
    from mol.hcp.schema import MCPServerConfig

    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise ConversationError("mcpServers: must be a list", field="mcpServers")
    servers: dict[str, Any] = {}
    for index, entry in enumerate(raw):
        server = sdk.mcp_server(entry, index)
        field = f"mcpServers[{index}].name"
        if not re.fullmatch(SERVER_NAME, server.name):
            raise ConversationError(
                f"{field}: {server.name!r} must be letters, digits, '_' or '-' (it names the "
                f"server's tools, mcp__NAME__TOOL)", field=field)
        if server.name in declared or server.name in servers:
            whose = "the artifact's" if server.name in declared else "another entry's"
            raise ConversationError(f"{field}: {server.name!r} is {whose} MCP server name",
                                    field=field)
        if getattr(server, "url", None) is not None:
            # The artifact may not hold credentials inline (http_headers refuses an
            # Authorization header); the editor's headers live in memory only.
            config = MCPServerConfig(url=server.url,
                                     startup_timeout_sec=CLIENT_STARTUP_SEC).model_copy(
                update={"http_headers": {h.name: h.value for h in server.headers}})
        else:
            config = MCPServerConfig(command=server.command, args=list(server.args),
                                     env={v.name: v.value for v in server.env}, cwd=cwd,
                                     startup_timeout_sec=CLIENT_STARTUP_SEC)
        servers[server.name] = config
    return servers
