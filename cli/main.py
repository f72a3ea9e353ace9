"""The ``mol`` command line.

Subcommands are registered lazily: ``COMMANDS`` maps each name to the module
that implements it, and only the chosen module is imported. ``mol --help``
therefore never imports litellm, mcp or docker (litellm alone takes seconds).

A command module exposes ``configure(parser)`` (or the function the table
names after a colon), which adds its arguments and
sets ``func`` (a callable taking the parsed namespace and returning an exit
code, or a coroutine function, run under anyio).

Exit codes: 0 success, 2 invalid input, 1 anything else, 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import sys
from collections.abc import Sequence
from typing import NamedTuple

from mol.core import __version__
from mol.core.errors import MolError, exception_leaves


class Command(NamedTuple):
    """A subcommand: where its ``configure`` function lives (``module`` or
    ``module:function``) and its one-line help."""

    module: str
    help: str

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """Import the implementing module and let it add its arguments."""
        module, _, function = self.module.partition(":")
        getattr(importlib.import_module(module), function or "configure")(parser)


COMMANDS: dict[str, Command] = {
    "run": Command("mol.cli.commands.run:configure_run", "run one turn and print the answer"),
    "chat": Command("mol.cli.commands.run:configure_chat", "hold a conversation"),
    "tools": Command("mol.cli.commands.tools:configure_tools", "list the tools an adapter sees"),
    "plugins": Command("mol.cli.commands.tools:configure_plugins", "list the loaded plugins"),
    "hcp": Command("mol.cli.commands.hcp", "validate, digest, diff and patch HCP artifacts"),
    "skills": Command("mol.cli.commands.skills", "list, show and validate Agent Skills"),
    "adapters": Command("mol.cli.commands.adapters", "the adapters' LoRAs on the running engine: list their versions, register, unregister stale ones, hash"),
    "engine": Command("mol.cli.commands.engine", "serve a model engine (local llama.cpp, the scripted test double); print the vLLM or SGLang launch command; check that it serves the artifact's adapters"),
    "mcp": Command("mol.cli.commands.mcp", "list MCP servers and their tools, resources and prompts; call a tool"),
    "sandbox": Command("mol.cli.commands.sandbox", "run commands in hardened Docker sandboxes; build the image; gc"),
    "serve": Command("mol.cli.commands.serve", "serve the OpenAI and Anthropic APIs (chat completions, responses, messages)"),
    "acp": Command("mol.cli.commands.acp", "be an Agent Client Protocol agent on stdio, for editors (Zed, JetBrains, Neovim)"),
    "sessions": Command("mol.cli.commands.sessions", "list stored sessions; show one's views, routes and summaries"),
    "genui": Command("mol.cli.commands.genui", "check generated UI (A2UI, UI4A TSX), preview it in a browser, install its toolchain"),
    "eval": Command("mol.cli.commands.eval", "run task suites in sandboxes; replay, show and compare runs; the slice an edit affects"),
    "evolve": Command("mol.cli.commands.evolve", "propose HCP edits, evaluate the slice they affect, promote with a statistical gate, show the lineage"),
}
"""Every subcommand, in the order ``mol --help`` lists them."""


def build_parser(selected: str | None = None) -> argparse.ArgumentParser:
    """The argument parser; only the ``selected`` command's module is imported."""
    parser = argparse.ArgumentParser(
        prog="mol",
        description="mol: an agent runtime for Mixture-of-LoRA models.",
        epilog="Run 'mol COMMAND --help' for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"mol {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, command in COMMANDS.items():
        child = sub.add_parser(name, help=command.help, description=command.help)
        if name == selected:
            command.configure(child)
    return parser


def _selected(argv: Sequence[str]) -> str | None:
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_selected(argv))
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:  # a command group called without its subcommand
        parser.parse_args([*argv, "--help"])
        return 2
    try:
        try:
            if inspect.iscoroutinefunction(func):
                import anyio

                return anyio.run(func, args) or 0
            return func(args) or 0
        except BaseExceptionGroup as group:
            raise _first_leaf(group) from group
    except MolError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `mol ... | head`): not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as exc:
        if os.environ.get("MOL_DEBUG"):
            raise
        print(f"internal error: {type(exc).__name__}: {exc}\n"
              "(set MOL_DEBUG=1 to see the traceback)", file=sys.stderr)
        return 1


def _first_leaf(group: BaseExceptionGroup) -> BaseException:
    """The error to report from a task group: a MolError if any, else the first one."""
    leaves = exception_leaves(group)
    return next((e for e in leaves if isinstance(e, MolError)), leaves[0])


if __name__ == "__main__":
    raise SystemExit(main())
