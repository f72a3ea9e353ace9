"""What several CLI commands share: the ``--hcp`` option, loading the artifact, opening
the session store, a stored session for ``mol run`` / ``mol chat``, text made safe for a
terminal, and ending on SIGTERM/SIGHUP with everything closed.

Commands import from here, never from each other.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mol.core.errors import UsageError


def add_hcp_argument(parser: argparse.ArgumentParser,
                     help: str = "the HCP artifact (default: $MOL_HCP)") -> None:
    """The ``--hcp FILE`` option every command that needs an artifact takes."""
    parser.add_argument("--hcp", type=Path, default=os.environ.get("MOL_HCP") or None, help=help)


def add_engine_check_argument(parser: argparse.ArgumentParser) -> None:
    """``--no-engine-check``: start without checking that the engine serves the artifact's
    adapters (``engine_checked``)."""
    parser.add_argument("--no-engine-check", action="store_true",
                        help="start without checking that the engine serves every adapter "
                        "of the artifact (see 'mol engine check')")


async def engine_checked(runtime: Any, args: argparse.Namespace) -> None:
    """Refuse to go on when ``runtime``'s engine misses or serves a foreign adapter (unless
    ``--no-engine-check``); the model list read gives the runtime its windows."""
    if not getattr(args, "no_engine_check", False):
        from mol.runtime import require_served

        await require_served(runtime.artifact, runtime.engine, runtime.windows)


def add_adapter_argument(parser: argparse.ArgumentParser, help: str) -> None:
    """``--adapter NAME``: one of the adapters the artifact declares (checked once it is
    loaded, by ``checked_adapter``: the choices come from the artifact, not from mol)."""
    parser.add_argument("--adapter", metavar="NAME", help=help)


def checked_adapter(artifact: Any, name: str | None) -> str | None:
    """``--adapter``'s value when ``artifact`` declares it; a usage error naming the
    declared adapters otherwise."""
    import difflib

    if name is None or name in artifact.doc.adapters:
        return name
    names = artifact.doc.adapter_names
    close = [n for n in names if n.lower() == name.lower()] or difflib.get_close_matches(
        name, names, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise UsageError(f"--adapter {name!r}: {hint}the artifact {artifact.name!r} declares "
                     f"{', '.join(names)}")


def read_patch(path: Path) -> Any:
    """The JSON of a patch file (``--patch``); a ``UsageError`` naming the file otherwise."""
    import json

    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read patch {path}: {exc.strerror or exc}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: not valid JSON: {exc}") from exc


def load_artifact(path: Path | None) -> Any:
    """The artifact named by ``--hcp``, or a usage error saying how to name one."""
    from mol.hcp.loader import load

    if path is None:
        raise UsageError("no HCP artifact: pass --hcp FILE or set MOL_HCP")
    artifact = load(path)
    if artifact.warnings:
        import sys

        count = len(artifact.warnings)
        print(f"warning: {count} thing{'s' * (count > 1)} in {path} load with a warning (a skill "
              f"beyond the spec, a bundle part mol does not run); see 'mol hcp validate {path}'",
              file=sys.stderr)
    return artifact


def open_store(args: argparse.Namespace) -> Any:
    """The store named by ``--store``, ``$MOL_SESSION_STORE`` or the artifact."""
    from mol.runtime.sessions import STORE_ENV, open_store

    url = args.store or os.environ.get(STORE_ENV)
    if url is None:
        from mol.hcp.schema import SessionConfig

        if args.hcp is not None:
            url = load_artifact(args.hcp).doc.session.store
        else:
            url = SessionConfig().store
    return open_store(url)


class StoredSession:
    """What ``mol run/chat --session ID`` hands the runtime session: the stored
    conversation and its checkpoint (both None when nothing is stored)."""

    def __init__(self, conversation: Any = None, checkpoint: Any = None) -> None:
        self.conversation = conversation
        self.checkpoint = checkpoint


def stored_session(artifact: Any, session_id: str | None) -> Any:
    """An async context with the stored conversation ``session_id`` (a new one under that id
    if the store has none) and its checkpoint; without an id, nothing is stored."""
    import sys
    from contextlib import asynccontextmanager

    from mol.core.errors import SessionNotFound
    from mol.runtime import Conversation, Recorder
    from mol.runtime.sessions import held, new_owner, open_store, store_url_for

    @asynccontextmanager
    async def context() -> Any:
        if session_id is None:
            yield StoredSession()
            return
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,128}", session_id):
            raise UsageError(f"--session {session_id!r}: use letters, digits, '_', '.', '-'")
        async with (open_store(store_url_for(artifact)) as store,
                    held(store, session_id, new_owner(), artifact.doc.session.lease)):
            # The lease: a server replica (or another mol run) cannot write this session
            # meanwhile, and a crash here is recognised as one by whoever comes next.
            try:
                conversation = await store.load(session_id)
            except SessionNotFound:
                conversation = Conversation(id=session_id)
                print(f"[mol] new session {session_id} in {store.location}", file=sys.stderr)
            yield StoredSession(conversation, Recorder(store, artifact.digest).checkpoint)

    return context()


class Stopped:
    """Which signal ended a block run under ``ended_by_signals`` (``None``: none did)."""

    signal: int | None = None

    def exit_code(self, code: int) -> int:
        """``code``, or 128 plus the signal's number when one ended the block."""
        return code if self.signal is None else 128 + self.signal


@asynccontextmanager
async def ended_by_signals() -> AsyncIterator[Stopped]:
    """SIGTERM and SIGHUP cancel the block instead of killing the process at once, so
    what it opened (a sandbox, MCP servers) is closed on the way out."""
    import signal

    import anyio

    stopped = Stopped()
    async with anyio.create_task_group() as group:

        async def watch() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
                async for number in signals:
                    stopped.signal = int(number)
                    group.cancel_scope.cancel()
                    return

        group.start_soon(watch)
        try:
            yield stopped
        finally:
            group.cancel_scope.cancel()


async def blocking_call(func: Any, *args: Any) -> Any:
    """``func(*args)`` (``input``, a read of stdin) in a daemon thread: when the caller is
    cancelled (a signal), it stops waiting at once and the process can exit with the
    thread still blocked, which a pooled worker thread would not allow."""
    import threading

    import anyio
    import anyio.from_thread
    import anyio.lowlevel

    outcome: list[Any] = []
    done = anyio.Event()
    token = anyio.lowlevel.current_token()

    def work() -> None:
        try:
            outcome.append((True, func(*args)))
        except BaseException as exc:  # handed to the caller, which raises it
            outcome.append((False, exc))
        try:
            anyio.from_thread.run_sync(done.set, token=token)
        except RuntimeError:
            pass  # the event loop is gone: nobody waits any more

    threading.Thread(target=work, daemon=True, name="mol stdin").start()
    await done.wait()
    ok, value = outcome[0]
    if not ok:
        raise value
    return value
