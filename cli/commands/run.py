"""``mol run`` (one turn) and ``mol chat`` (a conversation)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from mol.cli.commands.common import add_engine_check_argument, add_hcp_argument, load_artifact
from mol.core.text import escaped
from mol.core.tools import Approval


def _common(parser: argparse.ArgumentParser) -> None:
    add_hcp_argument(parser)
    parser.add_argument("--engine-url", help="engine base URL, overriding the artifact's "
                        "engine.api_base (also $MOL_ENGINE_URL)")
    parser.add_argument("--session", metavar="ID", help="continue (or start) the stored "
                        "session ID (see 'mol sessions list')")
    parser.add_argument("--raw", action="store_true",
                        help="print model and tool text as it is, control sequences included "
                        "(at a terminal they are shown escaped by default)")
    add_engine_check_argument(parser)


def configure_run(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mol run``."""
    _common(parser)
    parser.add_argument("--json", action="store_true",
                        help="print every event as a JSON line instead of only the answer")
    parser.add_argument("prompt", nargs="+", help="the user's turn")
    parser.set_defaults(func=run)


def configure_chat(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mol chat``."""
    _common(parser)
    parser.set_defaults(func=chat)


def shown(text: str, raw: bool, stream: Any = None) -> str:
    """``text`` as it may be written to ``stream`` (stdout): escaped at a terminal unless
    ``raw``, so model output cannot drive the terminal."""
    stream = sys.stdout if stream is None else stream
    return text if raw or not stream.isatty() else escaped(text)


class Progress:
    """Shows what a turn does on stderr (route, tools, UI checks), for people at a terminal;
    model and tool text in it is always escaped."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, event: Any) -> None:
        if not self.enabled:
            return
        from mol.core import events as ev

        line = None
        if isinstance(event, ev.RouteDecided):
            line = f"route -> {event.adapter}" + (f" (fallback: {event.reason})"
                                                  if event.fallback else "")
        elif isinstance(event, ev.ToolCalled):
            line = f"{event.adapter} calls {event.name} {event.arguments[:120]}"
        elif isinstance(event, ev.ToolReturned) and event.is_error:
            line = f"{event.name}: {event.content[:200]}"
        elif isinstance(event, ev.Failed):
            line = f"warning: {event.where}: {event.message}"
        elif isinstance(event, ev.GenUIChecked):
            count = sum(len(ui["problems"]) for ui in event.uis)
            line = (f"{event.adapter} UI: " + ("valid" if event.valid else f"{count} problems")
                    + ("" if event.final else ", sent back for repair"))
        if line:
            print(f"\033[2m[mol] {escaped(line)}\033[0m", file=sys.stderr, flush=True)


def _json_printer(raw: bool) -> Any:
    # At a terminal, every non-ASCII character is a \u escape: still JSON, and inert.
    ascii_only = not raw and sys.stdout.isatty()

    def printer(event: Any) -> None:
        print(json.dumps(event.to_dict(), ensure_ascii=ascii_only), flush=True)

    return printer


async def run(args: argparse.Namespace) -> int:
    """One turn: print only the answer (or, with --json, the events)."""
    from mol.runtime import start_import

    start_import()  # the longest part of start-up, overlapped with the rest
    from mol.cli.commands.common import ended_by_signals, engine_checked, stored_session
    from mol.runtime import open_runtime

    artifact = load_artifact(args.hcp)
    on_event = _json_printer(args.raw) if args.json else Progress(sys.stderr.isatty())
    async with ended_by_signals() as stopped:
        async with (
            stored_session(artifact, args.session) as stored,
            open_runtime(artifact, engine_url=args.engine_url) as runtime,
        ):
            await engine_checked(runtime, args)
            async with runtime.session(stored.conversation, checkpoint=stored.checkpoint,
                                       observers=[on_event]) as session:
                result = await session.turn(" ".join(args.prompt))
        if not args.json:
            print(shown(result.answer, args.raw))
    return stopped.exit_code(0)


async def chat(args: argparse.Namespace) -> int:
    """A conversation: interactive at a terminal, one turn per line when piped."""
    from mol.runtime import start_import

    start_import()
    from mol.cli.commands.common import ended_by_signals, engine_checked, stored_session
    from mol.runtime import open_runtime

    artifact = load_artifact(args.hcp)
    interactive = sys.stdin.isatty()
    elicit = _elicit_at_terminal if interactive else None
    async with (
        ended_by_signals() as stopped,
        stored_session(artifact, args.session) as stored,
        open_runtime(artifact, engine_url=args.engine_url, elicit=elicit) as runtime,
    ):
        await engine_checked(runtime, args)
        async with runtime.session(stored.conversation, checkpoint=stored.checkpoint,
                                   approve=_ask_user if interactive else None, elicit=elicit,
                                   observers=[Progress(interactive)]) as session:
            await _converse(session, artifact, interactive, args)
    return stopped.exit_code(0)


async def _converse(session: Any, artifact: Any, interactive: bool,
                    args: argparse.Namespace) -> None:
    """``mol chat``'s turns until the end of its input."""
    from mol.cli.commands.chatting import builtin, gauge, run_builtin
    from mol.cli.commands.common import blocking_call

    if interactive:
        print(f"mol chat with {artifact.name} ({artifact.digest[:19]}). /help for commands, "
              "Ctrl-D to quit.", file=sys.stderr)
    while True:
        try:
            line = await blocking_call(_read_turn, interactive)
        except EOFError:
            break
        if not line.strip():
            continue
        own = builtin(line)
        if own is not None:
            await run_builtin(*own, session, artifact)
            continue
        result = await session.turn(line.strip())
        print(shown(result.answer, args.raw), flush=True)
        if interactive:
            await gauge(session, result.adapter)
    if args.session is not None:  # the person left: write the deferred summaries now
        await session.settle()


def _read_turn(interactive: bool) -> str:
    if interactive:
        return input("you> ")
    line = sys.stdin.readline()
    if not line:
        raise EOFError
    return line


def approval_question(call: Any) -> str:
    """What ``mol chat`` asks before an ``ask`` tool runs: the complete arguments, as
    indented JSON with every non-ASCII and control character escaped, so nothing (padding,
    escape sequences, reordering) hides what would run."""
    arguments = json.dumps(call.arguments, indent=2, ensure_ascii=True)
    return (f"allow {call.adapter} to run {escaped(call.name)} with\n{arguments}\n? "
            "[y]es, [a]lways in this conversation, [n]o, ne[v]er [y/a/N/v] ")


ANSWERS = {"y": Approval(True), "yes": Approval(True), "a": Approval(True, always=True),
           "always": Approval(True, always=True), "v": Approval(False, always=True),
           "never": Approval(False, always=True)}
"""The answers ``mol chat`` takes to its approval question; anything else is no."""


async def _ask_user(call: Any) -> Approval:
    from mol.cli.commands.common import blocking_call

    answer = await blocking_call(input, approval_question(call))
    return ANSWERS.get(answer.strip().lower(), Approval(False))


def _shown(text: Any) -> str:
    """Server text made safe for a terminal (control characters escaped)."""
    return "".join(c if c.isprintable() or c == "\n" else repr(c)[1:-1] for c in str(text))


def _typed(text: str, kind: Any) -> Any:
    if kind == "boolean":
        return text.lower() in ("y", "yes", "true", "1")
    if kind in ("integer", "number"):
        try:
            return int(text) if kind == "integer" else float(text)
        except ValueError:
            return text
    return text


def _ask_fields(schema: dict[str, Any]) -> dict[str, Any]:
    content: dict[str, Any] = {}
    for name, prop in (schema.get("properties") or {}).items():
        prop = prop if isinstance(prop, dict) else {}
        options = prop.get("enum")
        hint = f" ({'/'.join(map(str, options))})" if options else ""
        hint += f" [{prop['default']}]" if "default" in prop else ""
        text = input(f"  {_shown(prop.get('title') or name)}{_shown(hint)}: ").strip()
        if text:
            content[name] = _typed(text, prop.get("type"))
    return content


async def _elicit_at_terminal(server: str, request: dict[str, Any]) -> dict[str, Any]:
    """Answer an MCP server's elicitation at the terminal (form fields, or a URL to open);
    empty answers take the schema's defaults."""
    import anyio

    def ask() -> dict[str, Any]:
        print(f"\nMCP server {server} asks: {_shown(request.get('message', ''))}", file=sys.stderr)
        if request.get("mode") == "url":
            print(f"  open this URL: {_shown(request.get('url', ''))}", file=sys.stderr)
            done = input("done there? [y/N] ").strip().lower() in ("y", "yes")
            return {"action": "accept" if done else "decline"}
        if input("answer? [Y/n] ").strip().lower() in ("n", "no"):
            return {"action": "decline"}
        return {"action": "accept", "content": _ask_fields(request.get("requestedSchema") or {})}

    try:
        return await anyio.to_thread.run_sync(ask)
    except EOFError:
        return {"action": "cancel"}
