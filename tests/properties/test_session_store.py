"""A stateful model of the session store with crashes (issue 35), on SQLite and
PostgreSQL: after any sequence of saves (new, next turn, fork, not durable, refused
stale, failed), marks and responses, and a crash (the process gone between transactions
or in the middle of one), a fresh store opened on the same database holds exactly the
model's last committed state; turns left running are found interrupted.

A crash on SQLite: a transaction is left open with writes in it and the database file and
its WAL are copied as they are on disk (what a killed process leaves), then the store is
opened on the copy. On PostgreSQL: the connection in the middle of a transaction is ended
by ``pg_terminate_backend`` and the store is opened again."""

from __future__ import annotations

import contextlib
import copy
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

from mol.core.errors import SessionConflict, SessionError
from mol.runtime.sessions import SQLiteSessionStore, open_store
from mol.runtime.views import Conversation, TurnRecord

from .conftest import bounded
from .strategies import ODD

TABLES = ("leases", "marks", "responses", "messages", "turns", "sessions")
texts = st.one_of(st.text(max_size=12), ODD, st.sampled_from(["", "'; DROP TABLE x;--", "é"]))
adapters = st.sampled_from(["L0", "L1", "L2"])


def run(coroutine_function: Callable[..., Any], *args: Any) -> Any:
    return anyio.run(coroutine_function, *args)


def half_done(db: Any) -> None:
    """Writes of a transaction the crash interrupts: every session's state and revision
    changed, its messages gone, a new session with a mark."""
    db.execute("UPDATE sessions SET state = '{}', revision = revision + 7")
    db.execute("DELETE FROM messages")
    db.execute("INSERT INTO sessions (id, created, updated, hcp_digest, parent, state, "
               "revision) VALUES ('ghost', 0, 0, '', NULL, '{}', 1)")
    db.execute("INSERT INTO marks (key, session_id, mark, created) VALUES "
               "('chat:ghost', 'ghost', '{}', 0)")


class StoreModel(RuleBasedStateMachine):
    """The store against a dict of what was committed; subclasses say how to open a store
    and how to crash it."""

    sessions = Bundle("sessions")

    def __init__(self) -> None:
        super().__init__()
        self.committed: dict[str, dict[str, Any]] = {}  # id -> Conversation.to_dict()
        self.live: dict[str, Conversation] = {}  # what the client holds
        self.marks: dict[str, tuple[str, Any]] = {}
        self.responses: dict[str, Any] = {}
        self.count = 0
        self.store = self.fresh()

    # -- what a backend supplies --------------------------------------------------------

    def fresh(self) -> Any:
        raise NotImplementedError

    def crash(self, in_flight: bool) -> Any:
        """End the store as a crash would (``in_flight``: inside a transaction with writes
        in it); return a store opened again on what the crash left."""
        raise NotImplementedError

    # -- rules --------------------------------------------------------------------------

    refuses_nul = False
    """Whether the backend refuses a NUL character in a turn's text (PostgreSQL's text
    columns cannot hold one): the save is then an error that changes nothing."""

    def _save(self, conversation: Conversation, record: TurnRecord | None,
              parent: str | None = None, durable: bool = True) -> bool:
        """Save; whether it was committed (False only for a refused NUL)."""
        try:
            run(lambda: self.store.save(conversation, record, parent=parent, durable=durable))
        except SessionError as exc:
            if not (self.refuses_nul and "\\u0000" in json.dumps(conversation.to_dict())):
                raise
            assert "NUL" in str(exc), exc
            if conversation.id in self.committed:  # the client goes back to what is stored
                self.live[conversation.id] = Conversation.from_dict(
                    copy.deepcopy(self.committed[conversation.id]))
            return False
        self.committed[conversation.id] = copy.deepcopy(conversation.to_dict())
        return True

    @initialize(target=sessions)
    def first(self) -> str:
        return self.new_session("L0", "hello", True)

    @rule(target=sessions, adapter=adapters, user=texts, durable=st.booleans())
    def new_session(self, adapter: str, user: str, durable: bool) -> str:
        self.count += 1
        conversation = Conversation(id=f"conv_{self.count}")
        self._turn(conversation, adapter, user, "complete")
        if not self._save(conversation, None, durable=durable):
            return multiple()
        self.live[conversation.id] = conversation
        return conversation.id

    def _turn(self, conversation: Conversation, adapter: str, user: str, status: str) -> None:
        index = len(conversation.turns)
        conversation.turns.append(TurnRecord(index=index, adapter=adapter, user=user,
                                             answer=f"a{index}", status=status,
                                             tools=["echo"] if index % 2 else []))
        view = conversation.view(adapter)
        if not view:
            view.append({"role": "system", "content": f"You are {adapter}."})
        view += [{"role": "user", "content": user}, {"role": "assistant", "content": "ok"}]
        conversation.pending.setdefault("L3", []).append(
            {"adapter": adapter, "user": user, "summary": f"s{index}"})

    @rule(session=sessions, adapter=adapters, user=texts, durable=st.booleans(),
          status=st.sampled_from(["complete", "running", "waiting"]),
          every=st.booleans())
    def next_turn(self, session: str, adapter: str, user: str, durable: bool, status: str,
                  every: bool) -> None:
        conversation = self.live[session]
        self._turn(conversation, adapter, user, status)
        self._save(conversation, None if every else conversation.turns[-1], durable=durable)

    @rule(target=sessions, source=sessions)
    def fork(self, source: str) -> str:
        loaded = run(lambda: self.store.load(source))
        self.count += 1
        forked = Conversation.from_dict({**loaded.to_dict(), "id": f"conv_{self.count}",
                                         "revision": 0})
        self._save(forked, None, parent=source)
        self.live[forked.id] = forked
        return forked.id

    @rule(session=sessions)
    def stale_save_is_refused(self, session: str) -> None:
        stale = Conversation.from_dict(copy.deepcopy(self.committed[session]))
        stale.revision -= 1
        stale.view("L1").append({"role": "user", "content": "lost"})
        with pytest.raises(SessionConflict):
            run(lambda: self.store.save(stale, None))

    @rule(session=sessions)
    def failed_save_changes_nothing(self, session: str) -> None:
        conversation = self.live[session]
        before = copy.deepcopy(conversation)
        self._turn(conversation, "L2", "unstorable", "complete")
        conversation.turns[-1].answer = object()  # not JSON: the transaction rolls back
        with pytest.raises((SessionError, TypeError, ValueError)):
            run(lambda: self.store.save(conversation, None))
        self.live[session] = before

    @rule(key=st.sampled_from(["chat:a", "chat:b", "resp_1", "resp_2"]), session=sessions,
          mark=st.dictionaries(st.sampled_from(["turn", "view"]), st.integers(0, 9)),
          body=st.none() | st.dictionaries(st.sampled_from(["id", "text"]), texts))
    def put_mark(self, key: str, session: str, mark: dict, body: dict | None) -> None:
        response = None if body is None else (None, body)
        run(lambda: self.store.put_mark(key, session, mark, response))
        self.marks[key] = (session, mark)
        if body is not None:
            self.responses.setdefault(key, body)  # immutable: stored once

    @rule(key=st.sampled_from(["resp_1", "resp_2", "resp_3"]))
    def delete_response(self, key: str) -> None:
        assert run(lambda: self.store.delete_response(key)) == (key in self.responses)
        self.responses.pop(key, None)
        self.marks.pop(key, None)

    @precondition(lambda self: self.committed)
    @rule()
    def crash_between_transactions(self) -> None:
        self._reopen(in_flight=False)

    @precondition(lambda self: self.committed)
    @rule()
    def crash_mid_transaction(self) -> None:
        self._reopen(in_flight=True)

    @rule(session=sessions, durable=st.booleans())
    def crash_mid_turn(self, session: str, durable: bool) -> None:
        """The runtime checkpoints a turn as running, then the process dies."""
        conversation = self.live[session]
        self._turn(conversation, "L1", "in flight", "running")
        self._save(conversation, conversation.turns[-1], durable=durable)
        self._reopen(in_flight=False)

    def _reopen(self, in_flight: bool) -> None:
        self.store = self.crash(in_flight)
        for state in self.committed.values():  # the next open ends turns left running
            for turn in state["turns"]:
                if turn["status"] == "running":
                    turn["status"] = "interrupted"
        self.live = {sid: run(lambda s=sid: self.store.load(s)) for sid in self.committed}
        self.equals_the_model()

    @rule()
    def equals_the_model(self) -> None:
        """The store holds what the model committed (a rule, after each crash and at the
        end: as an invariant after every step it would cost most of the run)."""
        for sid, state in self.committed.items():
            loaded = run(lambda s=sid: self.store.load(s))
            assert loaded.to_dict() == state, sid
        listed = run(lambda: self.store.sessions(1000))
        assert {(s.id, s.turns) for s in listed} == {
            (sid, len(state["turns"])) for sid, state in self.committed.items()}
        for key in ("chat:a", "chat:b", "resp_1", "resp_2", "resp_3"):
            assert run(lambda k=key: self.store.get_mark(k)) == self.marks.get(key), key
            assert run(lambda k=key: self.store.get_response(k)) == self.responses.get(key)

    def teardown(self) -> None:
        try:
            self.equals_the_model()
        finally:
            self.store.close()


class SQLiteModel(StoreModel):
    def fresh(self) -> Any:
        self.folder = Path(tempfile.mkdtemp(prefix="mol-props-"))
        self.generation = 0
        return SQLiteSessionStore(self.folder / "0" / "s.db")

    def crash(self, in_flight: bool) -> Any:
        old = self.folder / str(self.generation) / "s.db"
        self.generation += 1
        new = self.folder / str(self.generation) / "s.db"
        new.parent.mkdir()
        transaction = self.store._transaction() if in_flight else None
        try:
            if transaction is not None:
                half_done(transaction.__enter__())
            for suffix in ("", "-wal"):  # as on disk; SQLite rebuilds the -shm index
                if Path(f"{old}{suffix}").exists():
                    shutil.copyfile(f"{old}{suffix}", f"{new}{suffix}")
        finally:
            if transaction is not None:
                transaction.__exit__(RuntimeError, RuntimeError("crash"), None)
        self.store.close()
        return SQLiteSessionStore(new)

    def teardown(self) -> None:
        super().teardown()
        shutil.rmtree(self.folder, ignore_errors=True)


def test_the_sqlite_store_equals_the_model_after_any_crash():
    run_state_machine_as_test(SQLiteModel, settings=bounded(30, stateful_step_count=12))


class PostgresModel(StoreModel):
    url = ""
    refuses_nul = True

    def fresh(self) -> Any:
        store = open_store(self.url)
        with store._transaction() as db:  # every example starts from an empty database
            db.execute(f"TRUNCATE {', '.join(TABLES)}")
        return store

    def crash(self, in_flight: bool) -> Any:
        import psycopg

        if in_flight:
            transaction = self.store._transaction()
            db = transaction.__enter__()
            try:
                half_done(db)
                with psycopg.connect(self.url, autocommit=True) as killer:
                    killer.execute("SELECT pg_terminate_backend(%s)",
                                   (db.connection.info.backend_pid,))
            finally:
                with contextlib.suppress(psycopg.Error):  # its connection is gone
                    transaction.__exit__(None, None, None)
        self.store.close()
        return open_store(self.url)


@pytest.mark.postgres
def test_the_postgresql_store_equals_the_model_after_any_crash(postgres_url):
    machine = type("PostgresModelAt", (PostgresModel,), {"url": postgres_url})
    run_state_machine_as_test(machine, settings=bounded(15, stateful_step_count=10))
