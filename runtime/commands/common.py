"""What several CLI commands share: the ``--hcp`` option, loading the artifact, opening
the session store, and a stored session for ``mol run`` / ``mol chat``.

Commands import from here, never from each other.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from mol.runtime.errors import UsageError


def add_hcp_argument(parser: argparse.ArgumentParser,
                     help: str = "the HCP artifact (default: $MOL_HCP)") -> None:
    """The ``--hcp FILE`` option every command that needs an artifact takes."""
    parser.add_argument("--hcp", type=Path, default=os.environ.get("MOL_HCP") or None, help=help)


def load_artifact(path: Path | None) -> Any:
    """The artifact named by ``--hcp``, or a usage error saying how to name one."""
    from mol.hcp.loader import load

    if path is None:
        raise UsageError("no HCP artifact: pass --hcp FILE or set MOL_HCP")
    return load(path)


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


class CliSession:
    """What ``mol run/chat --session ID`` hands the harness."""

    def __init__(self, conversation: Any = None, checkpoint: Any = None,
                 recorder: Any = None) -> None:
        self.conversation = conversation
        self.checkpoint = checkpoint
        self.recorder = recorder

    def observe(self, on_event: Any) -> Any:
        """``on_event``, recording the turn's events when a session is stored."""
        return on_event if self.recorder is None else self.recorder.observe(on_event)


def stored_session(artifact: Any, session_id: str | None) -> Any:
    """An async context with the stored conversation ``session_id`` (a new one under that id
    if the store has none) and its checkpoint; without an id, nothing is stored."""
    import re
    import sys
    from contextlib import asynccontextmanager

    from mol.runtime.errors import SessionNotFound
    from mol.runtime.recorder import Recorder
    from mol.runtime.sessions import held, new_owner, open_store, store_url_for
    from mol.runtime.views import Conversation

    @asynccontextmanager
    async def context() -> Any:
        if session_id is None:
            yield CliSession()
            return
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,128}", session_id):
            raise UsageError(f"--session {session_id!r}: use letters, digits, '_', '.', '-'")
        async with (open_store(store_url_for(artifact)) as store,
                    held(store, session_id, new_owner())):
            # The lease: a server replica (or another mol run) cannot write this session
            # meanwhile, and a crash here is recognised as one by whoever comes next.
            try:
                conversation = await store.load(session_id)
            except SessionNotFound:
                conversation = Conversation(id=session_id)
                print(f"[mol] new session {session_id} in {store.location}", file=sys.stderr)
            recorder = Recorder(store, artifact.digest)
            yield CliSession(conversation, recorder.checkpoint, recorder)

    return context()
