"""``mol mcp``: list MCP servers and their tools, resources and prompts; call a tool; sign in."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from mol.cli.commands.common import add_adapter_argument
from mol.core.errors import UsageError


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``mol mcp`` subcommands."""
    sub = parser.add_subparsers(dest="mcp_command", metavar="SUBCOMMAND", required=True)

    p = sub.add_parser("list", help="start the servers; show their status and qualified tool names")
    _hcp_option(p)
    add_adapter_argument(p, "only the servers and tools this adapter sees")
    p.set_defaults(func=list_servers)

    p = sub.add_parser("call", help="call a tool by its qualified name; print the result")
    _hcp_option(p)
    p.add_argument("name", metavar="QUALIFIED_NAME", help="e.g. mcp__time__get_current_time")
    p.add_argument("arguments", metavar="JSON_ARGS", nargs="?", default="{}",
                   help="the arguments as a JSON object (default: {})")
    p.set_defaults(func=call)

    p = sub.add_parser("resources", help="list the servers' resources, or read one")
    _hcp_option(p)
    p.add_argument("--read", nargs=2, metavar=("SERVER", "URI"), help="print this resource")
    p.set_defaults(func=resources)

    p = sub.add_parser("prompts", help="list the servers' prompts, or render one")
    _hcp_option(p)
    p.add_argument("--get", nargs=2, metavar=("SERVER", "NAME"), help="render this prompt")
    p.add_argument("--arg", action="append", default=[], metavar="KEY=VALUE",
                   help="a prompt argument (repeatable)")
    p.set_defaults(func=prompts)

    p = sub.add_parser("login", help="sign in to an OAuth-protected HTTP server once (tokens kept)")
    _hcp_option(p)
    p.add_argument("server", metavar="NAME", help="the [mcp_servers.NAME] to sign in to")
    p.add_argument("--no-browser", action="store_true",
                   help="only print the authorization URL (open it yourself)")
    p.set_defaults(func=login)


def _hcp_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--hcp", type=Path, required=True, metavar="FILE", help="the HCP TOML file")


def _load(args: argparse.Namespace) -> Any:
    from mol.hcp.loader import load

    artifact = load(args.hcp)
    servers = [n for n, c in artifact.doc.mcp_servers.items() if c.enabled]
    print(f"starting {len(servers)} MCP server(s): {', '.join(servers) or '-'}", file=sys.stderr)
    return artifact


async def _ready(manager: Any) -> None:
    """Wait for every server, reporting progress; a failed required server is shown, not raised."""
    from mol.core.errors import MCPStartupError

    started = time.monotonic()
    try:
        await manager.wait_ready()
    except MCPStartupError:
        pass
    print(f"servers settled in {time.monotonic() - started:.1f}s", file=sys.stderr)


async def list_servers(args: argparse.Namespace) -> int:
    """``mol mcp list``: exit 1 when a required server failed."""
    from mol.cli.commands.common import checked_adapter
    from mol.core.errors import MCPStartupError
    from mol.runtime.mcp import MCPManager

    artifact = _load(args)
    checked_adapter(artifact, args.adapter)
    async with MCPManager(artifact) as manager:
        await _ready(manager)
        shown = None
        if args.adapter:
            try:
                shown = {t.name for t in await manager.tools(args.adapter)}
            except MCPStartupError:
                shown = set()  # the failed required server is listed below
        status = 0
        for server in manager.status():
            if shown is not None and server.name not in artifact.doc.adapter(args.adapter).mcp_servers:
                continue
            details = ", ".join(x for x in (server.transport, server.protocol_version,
                                            f"pid {server.pid}" if server.pid else None,
                                            "required" if server.required else None) if x)
            print(f"{server.name}: {server.state} ({details})")
            if server.error:
                print(f"  error: {server.error}")
                status = 1 if server.required else status
            for tool in server.tools:
                if shown is None or tool in shown:
                    print(f"  {tool}")
            for tool, why in server.disabled_tools.items():
                print(f"  {tool} (disabled: {why})")
    return status


def _parse_arguments(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"JSON_ARGS is not valid JSON: {exc.msg} at line {exc.lineno} "
                         f"column {exc.colno}") from None
    if not isinstance(value, dict):
        raise UsageError(f"JSON_ARGS must be a JSON object, got {type(value).__name__}")
    return value


async def call(args: argparse.Namespace) -> int:
    """``mol mcp call``: print the result; exit 1 on a tool error, 2 on bad arguments."""
    from mol.core.tools import ToolContext, checked_arguments
    from mol.runtime.mcp import MCPManager

    arguments = _parse_arguments(args.arguments)
    artifact = _load(args)
    async with MCPManager(artifact) as manager:
        await _ready(manager)
        tools = {t.name: t for t in await manager.all_tools()}
        tool = tools.get(args.name)
        if tool is None:
            raise UsageError(f"no MCP tool named {args.name!r} (known: {', '.join(sorted(tools)) or 'none'})")
        try:
            arguments = await checked_arguments(tool, arguments)
        except ValueError as exc:
            raise UsageError(f"{args.name}: {exc}") from None
        result = await tool.call(arguments, ToolContext(adapter="cli"))
    print(result.content)
    return 1 if result.is_error else 0


async def resources(args: argparse.Namespace) -> int:
    """``mol mcp resources``."""
    from mol.runtime.mcp import MCPManager

    artifact = _load(args)
    async with MCPManager(artifact) as manager:
        await _ready(manager)
        if args.read:
            server, uri = args.read
            print((await manager.read_resource(server, uri)).content)
            return 0
        for server, resource in await manager.resources():
            mime = f" [{resource.mime_type}]" if resource.mime_type else ""
            about = f": {resource.description}" if resource.description else ""
            print(f"{server}  {resource.uri}  {resource.name}{mime}{about}")
    return 0


async def prompts(args: argparse.Namespace) -> int:
    """``mol mcp prompts``."""
    from mol.runtime.mcp import MCPManager

    values = {}
    for item in args.arg:
        key, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--arg {item!r} must be KEY=VALUE")
        values[key] = value
    artifact = _load(args)
    async with MCPManager(artifact) as manager:
        await _ready(manager)
        if args.get:
            rendered = await manager.get_prompt(*args.get, values or None)
            for message in rendered.messages:
                text = getattr(message.content, "text", None) or f"[{message.content.type} content]"
                print(f"{message.role}: {text}")
            return 0
        for server, prompt in await manager.prompts():
            names = ", ".join(a.name + ("" if a.required else "?") for a in prompt.arguments or [])
            about = f": {prompt.description}" if prompt.description else ""
            print(f"{server}  {prompt.name}({names}){about}")
    return 0


async def login(args: argparse.Namespace) -> int:
    """``mol mcp login``: run the OAuth browser flow once; exit 1 when the sign-in failed."""
    from types import SimpleNamespace

    from mol.hcp.loader import load
    from mol.runtime.mcp import MCPManager
    from mol.runtime.mcp.sdk.oauth import token_path

    artifact = load(args.hcp)
    config = artifact.doc.mcp_servers.get(args.server)
    if config is None or config.oauth is None:
        raise UsageError(f"[mcp_servers.{args.server}] with oauth is not in {args.hcp}")

    async def sign_in(url: str) -> None:
        print(f"Open this URL to sign in to {args.server}:\n  {url}", file=sys.stderr, flush=True)
        if not args.no_browser:
            import webbrowser

            import anyio

            await anyio.to_thread.run_sync(webbrowser.open, url)

    only = SimpleNamespace(doc=artifact.doc.model_copy(update={"mcp_servers": {args.server: config}}),
                           base_dir=artifact.base_dir)
    async with MCPManager(only, sign_in=sign_in) as manager:
        await _ready(manager)
        [status] = manager.status()
    if status.state != "ready":
        print(f"sign-in to {args.server} failed: {status.error}", file=sys.stderr)
        return 1
    print(f"signed in to {args.server}; tokens kept in {token_path(args.server, config.url)}")
    return 0
