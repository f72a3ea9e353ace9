"""``mol genui``: check generated UI, preview it in a browser, install the toolchain."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mol.core.errors import UsageError

DEFAULT_PORT = 8300


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``mol genui`` subcommands."""
    sub = parser.add_subparsers(dest="genui_command", metavar="SUBCOMMAND", required=True)

    p = sub.add_parser("check", help="check A2UI messages or a UI4A TSX module; prints the "
                       "problems or 'valid'")
    p.add_argument("file", type=Path, help="a .tsx module, .jsonl / .json A2UI messages, or "
                   "an answer with ```ui4a/tsx or ```a2ui blocks")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")
    p.set_defaults(func=check)

    p = sub.add_parser("preview", help="serve a page rendering the UI of a file (A2UI through "
                       "the Lit renderer, TSX in a sandboxed frame)")
    p.add_argument("file", type=Path, help="as for 'mol genui check'")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help=f"port to serve on (default: {DEFAULT_PORT}; 0 picks a free one)")
    p.set_defaults(func=preview)

    p = sub.add_parser("setup", help="install the npm toolchain (esbuild, TypeScript, React, "
                       "@a2ui/lit) into the GenUI cache, for offline use")
    p.add_argument("--force", action="store_true", help="reinstall even when it is up to date")
    p.set_defaults(func=setup)


async def check(args: argparse.Namespace) -> int:
    """Print each UI's problems (or ``valid``); exit 1 when any UI is invalid."""
    from mol.genui.checker import check_file

    uis = await check_file(args.file)
    if args.json:
        print(json.dumps([ui.to_dict() for ui in uis], indent=2, ensure_ascii=False))
    else:
        for ui in uis:
            label = "tsx" if ui.kind == "tsx" else f"a2ui {ui.version or ''}".strip()
            if ui.valid:
                print(f"{args.file}: {label}: valid")
            for problem in ui.problems:
                print(f"{args.file}: {label}: {problem}")
    return 0 if all(ui.valid for ui in uis) else 1


async def preview(args: argparse.Namespace) -> int:
    """Check the file, then serve its preview page until interrupted."""
    import socket

    from mol.genui.checker import check_file
    from mol.genui.web import preview_app
    from mol.runtime import serving

    if args.host not in ("127.0.0.1", "localhost", "::1"):
        raise UsageError("--host: the preview has no API key, so it serves on loopback only")
    uis = await check_file(args.file)
    for ui in uis:
        verdict = "valid" if ui.valid else f"invalid ({len(ui.problems)} problems)"
        print(f"{args.file}: {ui.kind}: {verdict}", file=sys.stderr)
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.bind((args.host, args.port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"--port {args.port}: cannot listen on {args.host}: {exc}") from None
    port = sock.getsockname()[1]
    print(f"preview at http://{args.host}:{port}/ (Ctrl-C to stop)", flush=True)
    with sock:
        await serving.serve(preview_app(uis, f"GenUI preview: {args.file.name}"),
                            sockets=[sock], log_level="warning")
    return 0


def setup(args: argparse.Namespace) -> int:
    """Install (or check) the toolchain; says where it is."""
    from mol.genui import toolchain

    toolchain.setup(force=args.force, say=lambda line: print(line, file=sys.stderr))
    print(toolchain.home())
    return 0
