"""``mol tools list`` and ``mol plugins list``."""

from __future__ import annotations

import argparse

from mol.cli.commands.common import add_adapter_argument, add_hcp_argument


def configure_tools(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mol tools``."""
    sub = parser.add_subparsers(dest="tools_command", metavar="SUBCOMMAND", required=True)
    p = sub.add_parser("list", help="the tools each adapter sees, with their policy decision")
    add_hcp_argument(p)
    add_adapter_argument(p, "only this adapter")
    p.add_argument("--all", action="store_true", help="also list hidden and denied tools")
    p.set_defaults(func=list_tools)


def configure_plugins(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mol plugins``."""
    sub = parser.add_subparsers(dest="plugins_command", metavar="SUBCOMMAND", required=True)
    p = sub.add_parser("list", help="loaded plugins, their tools, and plugins that failed")
    add_hcp_argument(p, help="use the artifact's [plugins] load list")
    p.set_defaults(func=list_plugins)


async def list_tools(args: argparse.Namespace) -> int:
    from mol.cli.commands.common import checked_adapter, load_artifact
    from mol.runtime.app import open_runtime
    from mol.runtime.policy import decide

    artifact = load_artifact(args.hcp)
    only = checked_adapter(artifact, args.adapter)
    async with open_runtime(artifact) as runtime:
        for adapter in [only] if only else artifact.doc.adapter_names:
            config = artifact.doc.adapter(adapter)
            tools = await runtime.all_tools(adapter)
            shown = [(n, decide(n, config)) for n in sorted(tools)]
            shown = [(n, d) for n, d in shown if args.all or d in ("allow", "ask")]
            print(f"{adapter}: {len(shown)} tool{'s' if len(shown) != 1 else ''}")
            for name, decision in shown:
                summary = tools[name].description.splitlines()[0][:70]
                print(f"  {name:<28} {decision:<6} {tools[name].source:<18} {summary}")
    return 0


def list_plugins(args: argparse.Namespace) -> int:
    from mol.plugins.manager import PluginManager

    load = None
    if args.hcp is not None:
        from mol.hcp.loader import load as load_hcp

        load = load_hcp(args.hcp).doc.plugins.load
    manager = PluginManager(load)
    for name in manager.loaded:
        tools = sorted(t for t in manager.tools if manager.owner(t) == name)
        print(f"{name}: {', '.join(tools) or 'no tools'}")
    for failure in manager.failures:
        print(f"FAILED {failure.name}: {failure.error}")
    return 1 if manager.failures else 0
