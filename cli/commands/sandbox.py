"""``mol sandbox``: run commands in hardened Docker sandboxes; build the image; gc."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from mol.core.errors import UsageError

TIMEOUT_EXIT = 124
"""Exit status of ``mol sandbox run`` when the command timed out (as ``timeout(1)``)."""


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``mol sandbox`` subcommands."""
    sub = parser.add_subparsers(dest="sandbox_command", metavar="SUBCOMMAND", required=True)

    p = sub.add_parser("run", help="run one command in a fresh sandbox; exit with its code",
                       description="Run CMD in a fresh sandbox with the HCP's [sandbox] "
                       "settings, stream its output, and exit with its exit code (124 on "
                       "timeout). One argument is a bash command line; several are quoted "
                       "as words.")
    _hcp_option(p)
    p.add_argument("--timeout", type=float, metavar="S", help="seconds before the command "
                   "is killed (default: [sandbox] timeout_sec)")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...")
    p.set_defaults(func=run)

    p = sub.add_parser("shell", help="an interactive shell in a fresh sandbox")
    _hcp_option(p)
    p.set_defaults(func=shell)

    p = sub.add_parser("gc", help="remove sandbox containers whose runtime is gone")
    p.set_defaults(func=gc)

    image = sub.add_parser("image", help="the sandbox image").add_subparsers(
        dest="image_command", metavar="SUBCOMMAND", required=True)
    p = image.add_parser("build", help="build the default image offline with debootstrap "
                         "(needs root; about 1.5 minutes)")
    p.add_argument("--tag", default=None, help="image name (default: mol-sandbox:bookworm)")
    p.add_argument("--mirror", default=None, help="Debian mirror URL")
    p.set_defaults(func=build_image)


def _hcp_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--hcp", type=Path, metavar="FILE",
                        help="HCP artifact whose [sandbox] settings to use (default: defaults)")


def _config(args: argparse.Namespace) -> Any:
    from mol.hcp.schema import SandboxConfig

    if args.hcp is None:
        return SandboxConfig()
    from mol.hcp.loader import load

    return load(args.hcp).doc.sandbox


def _command(words: list[str]) -> str:
    if words[:1] == ["--"]:
        words = words[1:]
    if not words:
        raise UsageError("mol sandbox run: give the command after '--', e.g. "
                         "mol sandbox run -- ls -la")
    return words[0] if len(words) == 1 else shlex.join(words)


def _notes(result: Any) -> list[str]:
    """A result's notes, less "the sandbox was killed": the CLI's sandbox ends with it anyway."""
    import dataclasses

    return dataclasses.replace(result, shell_exited=False).notes()


def _write(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


async def run(args: argparse.Namespace) -> int:
    """``mol sandbox run``: stream the output, exit with the command's code."""
    from mol.sandboxes.sandbox import open_sandbox

    command = _command(args.cmd)
    if args.timeout is not None and args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    async with open_sandbox(_config(args), session_id="cli") as sandbox:
        result = await sandbox.run(command, timeout=args.timeout, on_output=_write)
    for note in _notes(result):
        print(f"mol sandbox: {note}", file=sys.stderr)
    if result.timed_out:
        return TIMEOUT_EXIT
    return 1 if result.exit_code is None else result.exit_code


async def shell(args: argparse.Namespace) -> int:
    """``mol sandbox shell``: read lines, run each in the sandbox's persistent shell."""
    import anyio

    from mol.sandboxes.sandbox import open_sandbox

    config = _config(args)
    print(f"starting a sandbox ({config.image}) ...", file=sys.stderr)
    async with open_sandbox(config, session_id="cli-shell") as sandbox:
        print("ready: commands run in a persistent bash; Ctrl-D or 'exit' ends the session",
              file=sys.stderr)
        code = 0
        while True:
            cwd = (await sandbox.run("builtin pwd", timeout=10)).output.strip()
            try:
                line = await anyio.to_thread.run_sync(input, f"sandbox:{cwd}$ ")
            except EOFError:
                print(file=sys.stderr)
                return code
            if not line.strip():
                continue
            result = await sandbox.run(line, on_output=_write)
            code = result.exit_code or 0
            for note in _notes(result):
                print(f"[{note}]", file=sys.stderr)
            # In the sandbox, `exit` ends only its command; here it ends the session too.
            if result.shell_exited or line.split()[:1] == ["exit"]:
                return code


async def gc(args: argparse.Namespace) -> int:
    """``mol sandbox gc``: remove orphaned sandbox containers."""
    from mol.sandboxes.owner import gc_orphans

    removed = await gc_orphans()
    for container in removed:
        print(f"removed {container[:12]}")
    print(f"{len(removed)} orphaned sandbox container(s) removed", file=sys.stderr)
    return 0


async def build_image(args: argparse.Namespace) -> int:
    """``mol sandbox image build``: debootstrap + import, with progress on stderr."""
    import functools

    import anyio

    from mol.sandboxes import image

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    build = functools.partial(image.build, args.tag or image.DEFAULT_TAG,
                              mirror=args.mirror or image.MIRROR, progress=progress)
    image_id = await anyio.to_thread.run_sync(build)
    print(image_id)
    return 0
