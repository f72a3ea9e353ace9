"""The session stores (SQLite and PostgreSQL, the same tests for both): migrations,
one-transaction checkpoints, recovery, marks, responses, revisions and leases."""

from __future__ import annotations

import contextlib
import sqlite3

import anyio
import anyio.to_thread
import pytest

from mol.core.errors import SessionBusy, SessionConflict, SessionError, SessionNotFound
from mol.runtime.sessions import (
    MIGRATIONS,
    SQLiteSessionStore,
    TurnLog,
    new_owner,
    open_store,
    store_path,
)
from mol.runtime.views import Conversation, TurnRecord
from mol.server.turns.marks import continues_in_place, fork, mark_of

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request, tmp_path) -> str:
    """Each test below that takes it runs once per backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 's.db'}"
    return request.getfixturevalue("postgres_url")


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


async def test_a_conversation_round_trips_with_its_turn_log(store_url):
    conv = conversation_with(2)
    async with open_store(store_url) as store:
        await store.save(conv, None, TurnLog("sha256:abc"))
        log = TurnLog("sha256:def", {"prompt_tokens": 5}, [{"type": "route", "adapter": "L2"}])
        await store.save(conv, conv.turns[1], log)
        loaded = await store.load("conv_test")
        logs = await store.turn_logs("conv_test")
        listed = await store.sessions()
    assert loaded.to_dict() == conv.to_dict() and loaded.revision == 2
    assert [entry["hcp_digest"] for entry in logs] == ["sha256:abc", "sha256:def"]
    assert logs[1]["events"] == [{"type": "route", "adapter": "L2"}]
    assert [(s.id, s.turns, s.last_status) for s in listed] == [("conv_test", 2, "complete")]


async def test_unknown_sessions_are_not_found(store_url):
    async with open_store(store_url) as store:
        with pytest.raises(SessionNotFound, match="no session 'nope'"):
            await store.load("nope")
        assert await store.get_mark("chat:nope") is None
        assert await store.get_response("resp_nope") is None


async def test_running_turns_are_marked_interrupted_at_the_next_open(store_url):
    conv = conversation_with(1)
    conv.turns.append(TurnRecord(index=1, adapter="L0", user="half", status="running"))
    async with open_store(store_url) as store:
        await store.save(conv, None)
        assert store.interrupted == []
    async with open_store(store_url) as store:
        assert store.interrupted == [("conv_test", 1)]
        loaded = await store.load("conv_test")
    assert [t.status for t in loaded.turns] == ["complete", "interrupted"]


async def test_a_failed_checkpoint_leaves_the_last_one_whole(store_url):
    conv = conversation_with(1)
    async with open_store(store_url) as store:
        await store.save(conv, None)
        conv.view("L2").append({"role": "user", "content": "more"})
        conv.turns[0].answer = object()  # not storable: the transaction rolls back
        with pytest.raises((SessionError, sqlite3.Error, TypeError)):
            await store.save(conv, conv.turns[0])
        assert conv.revision == 1  # the failed save did not count
        conv.turns[0].answer = "a0 again"
        await store.save(conv, conv.turns[0])  # and the next one writes the message it lost
        loaded = await store.load("conv_test")
    assert len(loaded.view("L2")) == 3 and loaded.turns[0].answer == "a0 again"


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
    with pytest.raises(SessionError, match="unsupported session store 'mysql://x'"):
        store_path("mysql://x")


def _rows(store_url: str, query: str) -> list[tuple]:
    """Rows straight from the database, outside the store."""
    if store_url.startswith("sqlite"):
        return sql(store_path(store_url), query)
    import psycopg

    with psycopg.connect(store_url) as db:
        return [tuple(r) for r in db.execute(query).fetchall()]


async def test_a_checkpoint_appends_only_the_new_messages(store_url):
    conv = conversation_with(2)
    async with open_store(store_url) as store:
        await store.save(conv, None)
        first = _rows(store_url, "SELECT idx, body FROM messages ORDER BY idx")
        conv.view("L2").append({"role": "user", "content": "u2"})
        await store.save(conv, conv.turns[-1])
        second = _rows(store_url, "SELECT idx, body FROM messages ORDER BY idx")
    assert len(first) == 4 and second[:4] == first and second[4][0] == 4
    assert _rows(store_url, "SELECT state FROM sessions")[0][0].find("views") == -1


async def test_views_stored_in_the_old_state_blob_move_to_rows_on_migration(tmp_path):
    path = tmp_path / "old.db"
    with contextlib.closing(sqlite3.connect(path)) as db:
        for number, script in enumerate(MIGRATIONS[:2], start=1):
            db.executescript(f"BEGIN;\n{script.format(real='REAL')}\n"
                             f"PRAGMA user_version = {number};\nCOMMIT;")
        state = '{"views": {"L2": [{"role": "user", "content": "old"}]}, "pending": {"L0": ["s"]}}'
        db.execute("INSERT INTO sessions VALUES ('conv_old', 1, 1, '', NULL, ?)", (state,))
        db.commit()
    async with SQLiteSessionStore(path) as store:
        loaded = await store.load("conv_old")
    assert loaded.views == {"L2": [{"role": "user", "content": "old"}]}
    assert loaded.pending == {"L0": [{"adapter": "", "user": "", "summary": "s"}]}
    assert loaded.revision == 0
    assert sql(path, "PRAGMA user_version") == [(len(MIGRATIONS),)]


async def test_a_save_from_a_stale_revision_is_refused(store_url):
    async with open_store(store_url) as first, open_store(store_url) as second:
        await first.save(conversation_with(1), None)
        a, b = await first.load("conv_test"), await second.load("conv_test")
        a.view("L2").append({"role": "user", "content": "from a"})
        await first.save(a, a.turns[0])
        b.view("L2").append({"role": "user", "content": "from b"})
        with pytest.raises(SessionConflict, match="changed elsewhere"):
            await second.save(b, b.turns[0])
        with pytest.raises(SessionConflict, match="already exists"):
            await second.save(conversation_with(1), None)  # a new one under a taken id
        final = await second.load("conv_test")
    assert final.view("L2")[-1] == {"role": "user", "content": "from a"}
    assert final.revision == 2


async def test_a_lease_is_exclusive_until_it_expires_then_the_taker_interrupts_the_turn(
        store_url):
    conv = conversation_with(1)
    conv.turns.append(TurnRecord(index=1, adapter="L2", user="half", status="running"))
    async with open_store(store_url) as replica_a, open_store(store_url) as replica_b:
        a, b = new_owner(), new_owner()
        assert await replica_a.acquire("conv_test", a, ttl=1.5) == []
        await replica_a.save(conv, None)
        with pytest.raises(SessionBusy, match="in flight elsewhere") as busy:
            await replica_b.acquire("conv_test", b)
        assert 0 < busy.value.retry_after <= 1.5
        assert await replica_a.renew("conv_test", a, ttl=0.3)
        await anyio.sleep(0.5)  # a "dies": its lease runs out
        assert await replica_b.acquire("conv_test", b) == [1]
        assert not await replica_a.renew("conv_test", a)  # lost
        with pytest.raises(SessionConflict):  # and fenced out, should it write again
            await replica_a.save(conv, conv.turns[1])
        taken = await replica_b.load("conv_test")
        await replica_b.release("conv_test", b)
        assert await replica_a.acquire("conv_test", a) == []  # free again, nothing to undo
    assert [t.status for t in taken.turns] == ["complete", "interrupted"]


async def test_a_lease_of_a_dead_local_process_is_free_at_once(store_url):
    import sys

    from mol.sandboxes.owner import Owner, current

    child = await anyio.run_process([sys.executable, "-c", "import os; print(os.getpid())"])
    me = current()
    dead = Owner(me.host, me.boot, int(child.stdout), 1).label() + "#dead"
    async with open_store(store_url) as store:
        assert await store.acquire("conv_x", dead, ttl=600) == []
        assert await store.acquire("conv_x", new_owner()) == []  # no wait for the 600 s


async def test_opening_the_store_leaves_turns_held_by_a_live_replica_running(store_url):
    conv = conversation_with(1)
    conv.turns.append(TurnRecord(index=1, adapter="L2", user="live", status="running"))
    async with open_store(store_url) as replica_a:
        await replica_a.acquire("conv_test", new_owner(), ttl=60)
        await replica_a.save(conv, None)
        async with open_store(store_url) as replica_b:  # a second replica starts
            assert replica_b.interrupted == []
            assert (await replica_b.load("conv_test")).turns[1].status == "running"


async def test_a_stored_response_is_never_replaced(store_url):
    async with open_store(store_url) as store:
        await store.save(conversation_with(1), None)
        await store.put_mark("resp_1", "conv_test", {"turns": 1}, (None, {"v": 1}))
        await store.put_mark("resp_1", "conv_test", {"turns": 2}, (None, {"v": 2}))
        assert await store.get_response("resp_1") == {"v": 1}
        assert (await store.get_mark("resp_1"))[1] == {"turns": 2}  # marks do move


async def test_a_waiting_turns_asked_calls_are_found_and_its_marks_move_with_it(store_url):
    """What a restarted server reads of the waits (``asking``: the calls still open for a
    person, of the sessions whose turn waits), and the marks of a point moved as data
    (another process may have written a mark's keys in another order)."""
    waiting = conversation_with(1)
    waiting.turns[0].status = "waiting"
    waiting.ask("call_L2_aa", "risky", {"x": 1}, "plugin:toy")
    waiting.ask("call_L2_bb", "risky", {}, "mcp:s")
    waiting.close_asked("call_L2_bb", "was allowed")
    done = conversation_with(1)
    done.id = "conv_done"
    done.ask("call_L2_cc", "risky", {}, "builtin")  # its turn does not wait
    async with open_store(store_url) as store:
        await store.save(waiting, None)
        await store.save(done, None)
        asking = await store.asking()
        assert list(asking) == ["conv_test"]
        assert list(asking["conv_test"]) == ["call_L2_aa"]
        assert asking["conv_test"]["call_L2_aa"]["arguments"] == {"x": 1}
        assert (await store.load("conv_test")).asked == waiting.asked
        point = {"lengths": {"L2": 2, "L0": 0}, "turns": 1}
        await store.put_mark("resp_a", "conv_test", point)
        await store.put_mark("chat:a", "conv_test", {"turns": 1, "lengths": {"L0": 0, "L2": 2}})
        await store.put_mark("resp_b", "conv_test", {"turns": 0, "lengths": {}})
        assert await store.move_marks("conv_test", point, {"turns": 2}) == 2
        assert [(await store.get_mark(k))[1] for k in ("resp_a", "chat:a", "resp_b")] == [
            {"turns": 2}, {"turns": 2}, {"turns": 0, "lengths": {}}]


async def test_replicas_racing_for_one_lease_get_exactly_one_winner(postgres_url):
    stores = [open_store(postgres_url) for _ in range(4)]
    outcomes: list[str] = []

    async def race(store) -> None:
        try:
            await store.acquire("conv_race", new_owner())
            outcomes.append("won")
        except SessionBusy:
            outcomes.append("busy")

    try:
        async with anyio.create_task_group() as group:
            for store in stores:
                group.start_soon(race, store)
    finally:
        for store in stores:
            store.close()
    assert sorted(outcomes) == ["busy", "busy", "busy", "won"]


async def test_replicas_migrate_a_new_database_once(postgres_url):
    opened: list = []

    def start() -> None:
        opened.append(open_store(postgres_url))

    async with anyio.create_task_group() as group:
        for _ in range(3):
            group.start_soon(anyio.to_thread.run_sync, start)
    for store in opened:
        store.close()
    assert _rows(postgres_url, "SELECT version FROM mol_schema") == [(len(MIGRATIONS),)]


async def test_an_unreachable_postgresql_is_a_clear_error():
    with pytest.raises(SessionError) as caught:
        open_store("postgresql://u:secret@127.0.0.1:9/none")
    message = str(caught.value)
    assert message.startswith("postgresql://u:***@127.0.0.1:9/none: cannot connect to PostgreSQL")
    assert "refused" in message and "secret" not in message


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


LAZY_THEN_KILLED = """
import asyncio, os, signal, sys
from mol.runtime.sessions import TurnLog, open_store
from mol.runtime.views import Conversation, TurnRecord

async def main():
    store = open_store(sys.argv[1])
    conv = Conversation(id="conv_lazy")
    conv.turns.append(TurnRecord(index=0, adapter="L2", user="u0", status="running"))
    conv.view("L2").append({"role": "user", "content": "u0"})
    await store.save(conv, conv.turns[0], TurnLog("sha256:lazy"), durable=False)
    os.kill(os.getpid(), signal.SIGKILL)  # no close, no flush: the process just dies

asyncio.run(main())
"""


async def test_a_commit_not_flushed_survives_the_process_being_killed(store_url, tmp_path):
    import subprocess
    import sys

    script = tmp_path / "lazy.py"
    script.write_text(LAZY_THEN_KILLED)
    done = await anyio.to_thread.run_sync(lambda: subprocess.run(
        [sys.executable, str(script), store_url], capture_output=True, timeout=120))
    assert done.returncode == -9, done.stderr.decode()[-2000:]
    async with open_store(store_url) as store:
        loaded = await store.load("conv_lazy")
        # The dead process's running turn is recovered as interrupted, its view intact.
        assert [t.status for t in loaded.turns] == ["interrupted"]
        assert loaded.view("L2") == [{"role": "user", "content": "u0"}]
        if store.backend == "sqlite":  # the lazy transaction left the connection at FULL
            await store.save(loaded, None, durable=False)
            assert store._db.execute("PRAGMA synchronous").fetchone() == (2,)
