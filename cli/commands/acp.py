"""``mol acp``: mol as an Agent Client Protocol agent on stdio, for editors (docs/acp.md)."""

from __future__ import annotations

import argparse

from mol.cli.commands.common import add_hcp_argument


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mol acp``."""
    add_hcp_argument(parser)
    parser.add_argument("--engine-url", help="engine base URL, overriding the artifact's "
                        "engine.api_base (also $MOL_ENGINE_URL)")
    parser.add_argument("--verbose", action="store_true",
                        help="log what mol does (sessions, turns) on stderr, not only problems")
    parser.set_defaults(func=acp)


async def acp(args: argparse.Namespace) -> int:
    """Serve the editor on stdin and stdout until it closes stdin; logs go to stderr."""
    import importlib.util

    from mol.core.errors import UsageError

    if importlib.util.find_spec("acp") is None:
        raise UsageError("mol acp needs the Agent Client Protocol SDK: "
                         "pip install 'mol-agent[acp]'")
    # First: nothing written from here on (a library's print, a child process) can reach
    # the protocol's stdout, nor read its stdin.
    from mol.acpagent.wire import claim_stdio

    reading, writing = claim_stdio()
    from mol.runtime import start_import

    start_import()
    import logging
    import sys

    from mol.acpagent.stdio import serve
    from mol.cli.commands.common import ended_by_signals, load_artifact

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("mol acp: %(levelname)s: %(name)s: %(message)s"))
    logger = logging.getLogger("mol")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO if args.verbose else logging.WARNING)
    artifact = load_artifact(args.hcp)
    async with ended_by_signals() as stopped:
        await serve(artifact, reading=reading, writing=writing, engine_url=args.engine_url)
    return stopped.exit_code(0)
