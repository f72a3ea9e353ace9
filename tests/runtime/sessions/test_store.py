"""The SQLite session store: migrations, one-transaction checkpoints, recovery, marks."""

from __future__ import annotations

import contextlib
import sqlite3

import pytest

from mol.runtime.errors import SessionError, SessionNotFound
from mol.runtime.server.marks import continues_in_place, fork, mark_of
from mol.runtime.sessions import MIGRATIONS, SQLiteSessionStore, TurnLog, store_path
from mol.runtime.views import Conversation, TurnRecord

pytestmark = pytest.mark.anyio


def conversation_with(turns: int) -> Conversation:
    conv = Conversation(id="conv_test")
    for i in range(turns):
        conv.turns.append(TurnRecord(index=i, adapter="L2", user=f"u{i}", answer=f"a{i}",
                                     summary=f"s{i}", tools=["echo"]))
        conv.view("L2").extend([{"role": "user", "content": f"u{i}"},
                                {"role": "assistant", "content": f"a{i}"}])
        conv.share_summary("L2", f"s{i}", ("L0", "L1", "L2", "L3"), f"u{i}")
    return conv


def sql(path, query, *args):
    with contextlib.closing(sqlite3.connect(path)) as db:
        return db.execute(query, args).fetchall()


async def test_a_new_store_runs_every_migration_in_wal_with_full_sync(tmp_path):
    path = tmp_path / "deep" / "s.db"
    async with SQLiteSessionStore(path) as store:
        assert store._db.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
    assert sql(path, "PRAGMA user_version") == [(len(MIGRATIONS),)]
    assert sql(path, "PRAGMA journal_mode") == [("wal",)]
    SQLiteSessionStore(path).close()  # reopening migrates nothing


async def test_a_newer_schema_is_refused(tmp_path):
    path = tmp_path / "s.db"
    SQLiteSessionStore(path).close()
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    with pytest.raises(SessionError, match="newer than this mol knows"):
        SQLiteSessionStore(path)


async def test_a_conversation_round_trips_with_its_turn_log(tmp_path):
    conv = conversation_with(2)
    async with SQLiteSessionStore(tmp_path / "s.db") as store:
        await store.save(conv, None, TurnLog("sha256:abc"))
        log = TurnLog("sha256:def", {"prompt_tokens": 5}, [{"type": "route", "adapter": "L2"}])
        await store.save(conv, conv.turns[1], log)
        loaded = await store.load("conv_test")
        logs = await store.turn_logs("conv_test")
        listed = await store.sessions()
    assert loaded.to_dict() == conv.to_dict()
    assert [entry["hcp_digest"] for entry in logs] == ["sha256:abc", "sha256:def"]
    assert logs[1]["events"] == [{"type": "route", "adapter": "L2"}]
    assert [(s.id, s.turns, s.last_status) for s in listed] == [("conv_test", 2, "complete")]


async def test_unknown_sessions_are_not_found(tmp_path):
    async with SQLiteSessionStore(tmp_path / "s.db") as store:
        with pytest.raises(SessionNotFound, match="no session 'nope'"):
            await store.load("nope")
        assert await store.get_mark("chat:nope") is None
        assert await store.get_response("resp_nope") is None


async def test_running_turns_are_marked_interrupted_at_the_next_open(tmp_path):
    conv = conversation_with(1)
    conv.turns.append(TurnRecord(index=1, adapter="L0", user="half", status="running"))
    async with SQLiteSessionStore(tmp_path / "s.db") as store:
        await store.save(conv, None)
        assert store.interrupted == []
    async with SQLiteSessionStore(tmp_path / "s.db") as store:
        assert store.interrupted == [("conv_test", 1)]
        loaded = await store.load("conv_test")
    assert [t.status for t in loaded.turns] == ["complete", "interrupted"]


async def test_a_failed_checkpoint_leaves_the_last_one_whole(tmp_path):
    conv = conversation_with(1)
    async with SQLiteSessionStore(tmp_path / "s.db") as store:
        await store.save(conv, None)
        conv.view("L2").append({"role": "user", "content": "more"})
        conv.turns[0].answer = object()  # not storable: the transaction rolls back
        with pytest.raises((SessionError, sqlite3.Error, TypeError)):
            await store.save(conv, conv.turns[0])
        loaded = await store.load("conv_test")
    assert len(loaded.view("L2")) == 2 and loaded.turns[0].answer == "a0"


def test_marks_continue_in_place_or_fork():
    conv = conversation_with(2)
    head = mark_of(conv)
    assert continues_in_place(conv, head)
    older = {"lengths": {"L2": 2}, "pending": {a: [] for a in ("L0", "L1", "L2", "L3")},
             "turns": 1}
    assert not continues_in_place(conv, older)
    branch = fork(conv, older)
    assert branch.id != conv.id and branch.view("L2") == conv.view("L2")[:2]
    assert [t.index for t in branch.turns] == [0] and len(conv.turns) == 2
    # Only interrupted turns since the mark: continue in place, keeping their partial views.
    conv.turns.append(TurnRecord(index=2, adapter="L2", user="x", status="interrupted"))
    conv.view("L2").append({"role": "user", "content": "x"})
    assert continues_in_place(conv, head)


@pytest.mark.parametrize(("url", "expected"), [
    ("sqlite:////tmp/a.db", "/tmp/a.db"), ("sqlite:///rel/a.db", "rel/a.db"),
    ("/srv/s.db", "/srv/s.db")])
def test_store_urls(url, expected):
    assert str(store_path(url)) == expected


def test_store_url_home_and_unsupported():
    assert not str(store_path("sqlite:///~/s.db")).startswith("~")
    with pytest.raises(SessionError, match="unsupported session store 'postgres://x'"):
        store_path("postgres://x")


async def test_pending_summaries_stored_as_plain_text_still_load(tmp_path):
    """Sessions stored before other adapters' turns kept their user message: each queued
    entry was a summary string; it loads as an entry without a user message."""
    path = tmp_path / "s.db"
    async with SQLiteSessionStore(path) as store:
        await store.save(conversation_with(1), None)
    state = '{"views": {}, "pending": {"L4": ["[L2] fixed the build"]}}'
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.execute("UPDATE sessions SET state = ? WHERE id = 'conv_test'", (state,))
    async with SQLiteSessionStore(path) as store:
        loaded = await store.load("conv_test")
    assert loaded.pending == {"L4": [{"adapter": "", "user": "", "summary": "[L2] fixed the build"}]}
    opening = loaded.begin("L4", lambda: "You file.", "next", others="user+summary")
    assert opening[1]["content"].endswith("- [L2] fixed the build")


async def test_a_new_store_and_its_folders_are_private_to_the_user(tmp_path):
    import os
    import stat

    old = os.umask(0o022)  # the usual umask: files 0644, folders 0755 unless asked otherwise
    try:
        path = tmp_path / "state" / "mol" / "sessions.db"
        async with SQLiteSessionStore(path) as store:
            await store.save(conversation_with(1), None)
            files = {p.name: stat.S_IMODE(p.stat().st_mode) for p in path.parent.iterdir()}
    finally:
        os.umask(old)
    assert files == {"sessions.db": 0o600, "sessions.db-wal": 0o600, "sessions.db-shm": 0o600}
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "state").stat().st_mode) == 0o700
