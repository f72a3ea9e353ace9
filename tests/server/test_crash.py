"""Crash safety: ``mol serve`` killed with SIGKILL at several points of a turn, restarted,
continues the session with every earlier turn intact and the interrupted ones marked.
Also: SIGTERM drains a turn in flight, and the API key never reaches a log or the store."""

from __future__ import annotations

import contextlib
import json
import signal
import sqlite3
import subprocess
import threading
from pathlib import Path

import openai

from mol.runtime.testing import ScriptedEngine

from .conftest import KEY
from .processes import Server, engine_saw, in_background, until

SCRIPT = """
[[L0]]
constrained = true
when = "slow route"
delay = 30
times = -1
reply = "L0"
[[L0]]
constrained = true
times = -1
reply = "L0"
[[L0]]
constrained = false
when = "^User: .*slow summary"
delay = 30
times = -1
reply = "summary"
[[L0]]
constrained = false
when = "^User: "
times = -1
reply = "summary"
[[L0]]
constrained = false
when = "slow answer"
delay = 30
times = -1
reply = "never sent"
[[L0]]
constrained = false
when = "short hold"
delay = 1
times = -1
reply = "held"
[[L0]]
constrained = false
times = -1
reply = "noted"
"""


def turns(store: Path) -> list[tuple[int, str, str, str]]:
    with contextlib.closing(sqlite3.connect(store)) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        return db.execute("SELECT idx, status, user_text, answer FROM turns ORDER BY idx"
                          ).fetchall()


def test_sigkill_at_several_points_then_restart_and_continue(tmp_path):
    store, log = tmp_path / "sessions.db", tmp_path / "server.log"
    with ScriptedEngine.serve(SCRIPT) as engine:
        # 1. Killed while the adapter answers (after routing, before any commit).
        server = Server(tmp_path, engine.base_url, log)
        first = server.client.responses.create(model="mol", input="the first turn")
        pending = in_background(lambda: server.client.responses.create(
            model="mol", input="a slow answer", previous_response_id=first.id))
        until(lambda: engine_saw(engine, "slow answer", constrained=False), 30)
        server.kill()
        pending.join()
        assert turns(store) == [(0, "complete", "the first turn", "noted"),
                                (1, "running", "a slow answer", "")]

        # 2. Restarted: the running turn is marked interrupted. Killed in the summary hop.
        server = Server(tmp_path, engine.base_url, log)
        assert [t[1] for t in turns(store)] == ["complete", "interrupted"]
        third = server.client.responses.create(model="mol", input="a slow summary",
                                               previous_response_id=first.id)
        assert third.output_text == "noted"  # the reply does not wait for the summary
        until(lambda: engine_saw(engine, "User: a slow summary"), 30)
        server.kill()

        # 3. Killed while routing (no turn record exists yet).
        server = Server(tmp_path, engine.base_url, log)
        assert turns(store)[2] == (2, "interrupted", "a slow summary", "noted")
        pending = in_background(lambda: server.client.responses.create(
            model="mol", input="a slow route", previous_response_id=third.id))
        until(lambda: engine_saw(engine, "slow route", constrained=True), 30)
        server.kill()
        pending.join()

        # 4. Restarted again: continue from the last answer; everything earlier is intact.
        server = Server(tmp_path, engine.base_url, log)
        # Wrong keys are refused and never logged.
        with (contextlib.suppress(openai.AuthenticationError),
              openai.OpenAI(base_url=server.url, api_key=KEY + "x", max_retries=0) as wrong):
            wrong.models.list()
        last = server.client.responses.create(model="mol", input="the final turn",
                                              previous_response_id=third.id)
        assert last.output_text == "noted"
        # The reply comes before the summary hop; the turn completes right after it.
        until(lambda: [t[1] for t in turns(store)] == ["complete", "interrupted",
                                                        "interrupted", "complete"], 30)
        sent = [r["body"]["messages"] for r in engine.requests_for("L0")
                if r["body"]["messages"][-1]["content"] == "the final turn"][-1]
        assert [m["content"] for m in sent if m["role"] != "system"] == [
            "the first turn", "noted", "a slow summary", "noted", "the final turn"]

        # 5. SIGTERM drains a turn in flight: it completes, then the process exits 0.
        answers: list[str] = []
        drained = threading.Thread(target=lambda: answers.append(
            server.client.responses.create(model="mol", input="a short hold",
                                           previous_response_id=last.id).output_text))
        drained.start()
        until(lambda: engine_saw(engine, "short hold", constrained=False), 30)
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=20) == 0
        drained.join()
        server.client.close()
        assert answers == ["held"]

    show = subprocess.run(["mol", "sessions", "show", "--store", str(store), "--json",
                           _session(store)], capture_output=True, text=True, timeout=60)
    assert show.returncode == 0, show.stderr
    shown = json.loads(show.stdout)
    assert [t["status"] for t in shown["turns"]] == ["complete", "interrupted", "interrupted",
                                                     "complete", "complete"]
    assert all(t["hcp_digest"].startswith("sha256:") for t in shown["turns"])
    # The canary key is in no log line and nowhere in the database files.
    assert "interrupted by a restart" in log.read_text()
    for path in [log, *tmp_path.glob("sessions.db*")]:
        assert KEY.encode() not in path.read_bytes(), path


def _session(store: Path) -> str:
    with contextlib.closing(sqlite3.connect(store)) as db:
        return db.execute("SELECT DISTINCT session_id FROM turns").fetchone()[0]
