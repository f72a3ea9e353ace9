"""``mol sessions list``, ``mol sessions show ID``: what the client never sees; ``mol sessions
compact ID``: compact a stored session's views now; ``mol sessions export ID``: one
adapter's training data from a stored session."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from mol.cli.commands.common import add_hcp_argument, open_store


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mol sessions``."""
    sub = parser.add_subparsers(dest="sessions_command", metavar="SUBCOMMAND", required=True)
    p = sub.add_parser("list", help="stored sessions, most recent first")
    _store_arguments(p)
    p.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    p.set_defaults(func=list_sessions)
    p = sub.add_parser("show", help="a session's per-adapter views, route decisions and summaries")
    _store_arguments(p)
    p.add_argument("session", help="the session id (see 'mol sessions list')")
    p.set_defaults(func=show_session)
    p = sub.add_parser("compact", help="compact a stored session's views now (its adapters' "
                       "older messages become a summary; see docs/compaction.md)")
    _store_arguments(p)
    p.add_argument("session", help="the session id (see 'mol sessions list')")
    p.add_argument("--adapter", metavar="NAME", help="compact this adapter's view only "
                   "(default: every adapter with one)")
    p.add_argument("--instructions", default="", metavar="TEXT",
                   help="added to the compaction's prompt")
    p.add_argument("--engine-url", metavar="URL",
                   help="the engine (default: $MOL_ENGINE_URL, else the artifact's)")
    p.set_defaults(func=compact_session)
    p = sub.add_parser("export", help="one adapter's answer steps in a stored session as "
                       "chat-format JSONL for training, with a manifest (see docs/sessions.md)")
    add_hcp_argument(p, help="the artifact the session runs on (its store, the adapter's "
                     "tools, the engine's request shape; default: $MOL_HCP)")
    p.add_argument("--store", help="the store: sqlite:///PATH or a path "
                   "(default: $MOL_SESSION_STORE, else the artifact's)")
    p.add_argument("session", help="the session id (see 'mol sessions list')")
    p.add_argument("--adapter", required=True, metavar="NAME",
                   help="the adapter whose data it is")
    p.add_argument("--out", required=True, type=Path, metavar="FILE", help="the JSONL file "
                   "(its manifest goes beside it: data.jsonl -> data.manifest.json)")
    p.add_argument("--keep-prefixes", action="store_true", help="keep examples whose messages "
                   "are a prefix of another's (by default they are left out)")
    p.set_defaults(func=export_session)


def _store_arguments(parser: argparse.ArgumentParser) -> None:
    add_hcp_argument(parser, help="use the artifact's [session] store (default: $MOL_HCP)")
    parser.add_argument("--store", help="the store: sqlite:///PATH or a path "
                        "(default: $MOL_SESSION_STORE, else the artifact's)")
    parser.add_argument("--json", action="store_true", help="print JSON")


def _when(stamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))


async def list_sessions(args: argparse.Namespace) -> int:
    """One line per session: id, last update, turns, last turn's status, HCP digest."""
    async with open_store(args) as store:
        found = await store.sessions(args.limit)
    if args.json:
        print(json.dumps([vars(s) for s in found], indent=2))
        return 0
    for s in found:
        print(f"{s.id}  {_when(s.updated)}  {s.turns:3d} turns  {s.last_status or '-':11s}  "
              f"{s.hcp_digest[:19]}")
    return 0


async def show_session(args: argparse.Namespace) -> int:
    """Turns (route decisions, status, summaries) and every adapter's view."""
    async with open_store(args) as store:
        conversation = await store.load(args.session)
        logs = await store.turn_logs(args.session)
    if args.json:
        data = conversation.to_dict()
        for turn, extra in zip(data["turns"], logs, strict=True):
            turn.update(hcp_digest=extra["hcp_digest"], usage=extra["usage"],
                        events=extra["events"])
        print(json.dumps(data, indent=2, ensure_ascii=False))
        return 0
    print(f"session {conversation.id}: {len(conversation.turns)} turns")
    for turn, extra in zip(conversation.turns, logs, strict=True):
        route = f"route {turn.route_raw!r}" + (" (fallback)" if turn.route_fallback else "")
        print(f"\nturn {turn.index} [{turn.status}] -> {turn.adapter}, {route}, "
              f"hcp {extra['hcp_digest'][:19]}, usage {extra['usage']}")
        print(f"  user:    {turn.user}")
        print(f"  answer:  {turn.answer}")
        print(f"  summary: {_summary(conversation, turn)}")
        if turn.tools:
            print(f"  tools:   {', '.join(turn.tools)}")
    for adapter, view in sorted(conversation.views.items()):
        print(f"\nview {adapter} ({len(view)} messages)")
        for message in view:
            text = message.get("content") or json.dumps(message.get("tool_calls"))
            print(f"  {message['role']:9s} {str(text)[:300]}")
    return 0


def _summary(conversation: Any, turn: Any) -> str:
    """A turn's summary as ``show`` prints it: its own, its deferred segment's, or none yet."""
    from mol.runtime import segment_of

    segment = segment_of(conversation, turn.index)
    if segment is not None:
        first, last = segment["turns"][0], segment["turns"][-1]
        span = f"turn {first}" if first == last else f"turns {first}-{last}"
        return f"{segment['summary']} (deferred, {span})" + (
            "" if segment["ok"] else " (plain record)")
    if not turn.summary:
        return "(none yet)" if turn.status == "complete" else ""
    return turn.summary + ("" if turn.summary_ok else " (plain record)")


async def compact_session(args: argparse.Namespace) -> int:
    """Compact the stored session's views (holding its lease meanwhile); one line per
    compaction."""
    from mol.cli.commands.common import checked_adapter, load_artifact
    from mol.core.errors import UsageError
    from mol.runtime import Recorder, new_owner, open_runtime
    from mol.runtime.sessions import held

    if args.hcp is None:
        raise UsageError("mol sessions compact needs the artifact the session runs on: "
                         "pass --hcp FILE or set MOL_HCP")
    artifact = load_artifact(args.hcp)
    adapter = checked_adapter(artifact, args.adapter)
    async with (open_store(args) as store,
                held(store, args.session, new_owner(), artifact.doc.session.lease)):
        conversation = await store.load(args.session)
        recorder = Recorder(store, artifact.digest)
        async with (open_runtime(artifact, engine_url=args.engine_url) as runtime,
                    runtime.session(conversation, checkpoint=recorder.checkpoint,
                                    started=True) as session):
            done = await session.compact(adapter, args.instructions)
    if args.json:
        print(json.dumps([event.to_dict() for event in done], indent=2))
        return 0
    for event in done:
        print(f"{event.adapter}: about {event.tokens_before} -> {event.tokens_after} tokens, "
              f"{event.kept} messages kept, written by {event.writer} ({event.compaction})")
    if not done:
        print("nothing to compact: every view is short, or a PreCompact hook kept it")
    return 0


async def export_session(args: argparse.Namespace) -> int:
    """Write the adapter's examples from the stored session; one line saying what."""
    from mol.cli.commands.common import load_artifact
    from mol.core.errors import UsageError
    from mol.eval.exports.examples import manifest_path
    from mol.eval.exports.sessions import export_session as export

    if args.hcp is None:
        raise UsageError("mol sessions export needs the artifact the session runs on: "
                         "pass --hcp FILE or set MOL_HCP")
    artifact = load_artifact(args.hcp)
    async with open_store(args) as store:
        manifest = await export(store, args.session, artifact, args.adapter, args.out,
                                dedup=not args.keep_prefixes)
    print(f"wrote {manifest['examples']} examples for {args.adapter} to {args.out} "
          f"(manifest {manifest_path(args.out)})")
    return 0
