"""Crash safety: ``mol serve`` killed with SIGKILL at several points of a turn, restarted,
continues the session with every earlier turn intact and the interrupted ones marked.
Also: SIGTERM drains a turn in flight, and the API key never reaches a log or the store."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import httpx
import openai
import pytest

from mol.runtime.testing import ScriptedEngine

from .conftest import KEY, free_port, write_hcp

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


STARTED: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def no_server_left():
    """A failing test must not leave a ``mol serve`` process behind."""
    yield
    while STARTED:
        proc = STARTED.pop()
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


class Server:
    """One ``mol serve`` process, its log appended to ``log``."""

    def __init__(self, tmp: Path, engine_url: str, log: Path) -> None:
        self.port = free_port()
        key_file = tmp / "key"
        key_file.write_text(KEY + "\n")
        env = {**os.environ, "MOL_API_KEY_FILE": str(key_file)}
        env.pop("MOL_ALLOW_UNAUTHENTICATED", None)
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                ["mol", "serve", "--hcp", str(write_hcp(tmp)), "--port", str(self.port),
                 "--engine-url", engine_url, "--drain", "10"],
                stdout=out, stderr=subprocess.STDOUT, env=env)
        STARTED.append(self.proc)
        self.url = f"http://127.0.0.1:{self.port}/v1"
        until(self._healthy, 60)
        self.client = openai.OpenAI(base_url=self.url, api_key=KEY, max_retries=0, timeout=60)

    def _healthy(self) -> bool:
        assert self.proc.poll() is None, "mol serve exited"
        try:
            return httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def kill(self) -> None:
        self.client.close()
        self.proc.kill()
        self.proc.wait(timeout=10)


def until(condition, timeout: float) -> None:
    """Wait for ``condition()`` (polling), failing after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {condition}"
        time.sleep(0.05)


def in_background(call) -> threading.Thread:
    """Run a request whose server will die under it (its error is expected)."""
    def swallow() -> None:
        with contextlib.suppress(openai.APIError):
            call()

    thread = threading.Thread(target=swallow)
    thread.start()
    return thread


def engine_saw(engine, needle: str, constrained: bool | None = None) -> bool:
    for record in engine.requests_for("L0"):
        body = record["body"]
        if constrained is not None and ("structured_outputs" in body) != constrained:
            continue
        if needle in body["messages"][-1]["content"]:
            return True
    return False


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
