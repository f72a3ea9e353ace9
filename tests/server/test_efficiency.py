"""``mol serve`` with the engine-efficiency settings: a wrong guess of ``[router] speculate =
"sticky"`` never reaches the client's stream or the stored session, and the metrics count
the guesses; ``[summary] when = "deferred"`` summaries are written once a conversation is
idle, and survive a server killed between a turn and its summary."""

from __future__ import annotations

import contextlib
import json
import signal
import sqlite3
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mol.runtime.testing import ScriptedEngine

from .conftest import HCP, KEY, serve_app, write_hcp
from .processes import Server, until

LEAK = "WRONG-ADAPTER-TEXT"
SPECULATING = HCP.replace('prompt = "Route the turn."\n',
                          'prompt = "Route the turn."\nspeculate = "sticky"\n')
DEFERRED = '[summary]\nwhen = "deferred"\nidle_after = {idle}\n'
SCRIPT = f"""
[[L0]]
constrained = true
when = "@L1"
times = -1
delay = 0.6
reply = "L1"
[[L0]]
constrained = true
times = -1
delay = 0.6
reply = "L2"
[[L0]]
when_system = "^Summarize"
times = -1
reply = "segment summary"
[[L2]]
when = "@L1"
times = -1
reply = "{LEAK} streamed at once by the wrong adapter"
[[L2]]
times = -1
reply = "L2 answered"
[[L1]]
times = -1
reply = "L1 answered"
"""


def streamed_text(served, text: str, previous: str | None) -> tuple[str, str, str]:
    """One streamed Responses turn: (every SSE line joined, the answer, the response id)."""
    body = {"model": "mol", "input": text, "stream": True}
    if previous is not None:
        body["previous_response_id"] = previous
    lines: list[str] = []
    answer, response_id = "", ""
    with httpx.stream("POST", f"{served.url}/responses", json=body, timeout=60,
                      headers={"Authorization": f"Bearer {KEY}"}) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            lines.append(line)
            if not line.startswith("data: "):
                continue
            event = json.loads(line[6:])
            if event["type"] == "response.output_text.delta":
                answer += event["delta"]
            if event["type"] == "response.completed":
                response_id = event["response"]["id"]
    return "\n".join(lines), answer, response_id


def speculations(served) -> dict[tuple[str, str], float]:
    text = httpx.get(f"{served.url.removesuffix('/v1')}/metrics",
                     headers={"Authorization": f"Bearer {KEY}"}).text
    return {(s.labels["adapter"], s.labels["held"]): s.value
            for family in text_string_to_metric_families(text)
            if family.name == "mol_route_speculations" for s in family.samples
            if s.name.endswith("_total")}


def stored_text(store: Path) -> str:
    with contextlib.closing(sqlite3.connect(store)) as db:
        rows = [db.execute(f"SELECT * FROM {table}").fetchall()
                for table in ("sessions", "turns", "messages", "marks", "responses")]
    return json.dumps(rows)


def test_a_wrong_guess_never_reaches_the_client_or_the_store(tmp_path):
    with ScriptedEngine.serve(SCRIPT) as engine, \
            serve_app(tmp_path, engine.base_url, hcp=SPECULATING,
                      extra=DEFERRED.format(idle=0)) as served:
        _, first, previous = streamed_text(served, "one @L2", None)
        _, held, previous = streamed_text(served, "two @L2", previous)
        wire, answer, _ = streamed_text(served, "three @L1", previous)
        counted = speculations(served)
    assert (first, held, answer) == ("L2 answered", "L2 answered", "L1 answered")
    guessed = [r for r in engine.requests_for("L2") if "three @L1" in json.dumps(r["body"])
               and r["body"]["messages"][0]["content"].startswith("You code")]
    assert len(guessed) == 1 and guessed[0]["status"] == 200  # the engine answered it
    assert LEAK not in wire and LEAK not in stored_text(served.store)
    assert counted == {("L2", "true"): 1.0, ("L2", "false"): 1.0}


def test_deferred_summaries_are_written_once_the_conversation_is_idle(tmp_path):
    with ScriptedEngine.serve(SCRIPT) as engine, \
            serve_app(tmp_path, engine.base_url, extra=DEFERRED.format(idle=0.5)) as served:
        _, _, previous = streamed_text(served, "one @L2", None)
        _, _, previous = streamed_text(served, "two @L2", previous)  # before the quiet ended
        until(lambda: _segments(served.store), 20)
        summaries = _summaries(engine)
        _, answer, _ = streamed_text(served, "three @L1", previous)
    assert len(summaries) == 1  # one for both turns, written while nobody waited for it
    assert _segments(served.store) == [{"adapter": "L2", "turns": [0, 1],
                                        "summary": "[L2] segment summary", "ok": True}]
    assert answer == "L1 answered"
    l1 = json.dumps(engine.requests_for("L1")[-1]["body"]["messages"])
    assert "[L2] segment summary" in l1
    assert len(_summaries(engine)) == 1  # the switch found it written


def _summaries(engine: ScriptedEngine) -> list[dict]:
    """The summary requests (L0 writes them in this artifact)."""
    return [r for r in engine.requests_for("L0")
            if r["body"]["messages"][0]["content"].startswith("Summarize")]


def _segments(store: Path) -> list[dict]:
    with contextlib.closing(sqlite3.connect(store)) as db:
        rows = db.execute("SELECT state FROM sessions").fetchall()
    return [s for (state,) in rows for s in json.loads(state).get("segments", [])]


def test_a_server_killed_before_the_segments_summary_loses_nothing(tmp_path):
    log = tmp_path / "server.log"
    hcp = write_hcp(tmp_path, DEFERRED.format(idle=0))
    with ScriptedEngine.serve(SCRIPT) as engine:
        server = Server(tmp_path, engine.base_url, log, hcp=hcp)
        first = server.client.responses.create(model="mol", input="one @L2")
        second = server.client.responses.create(model="mol", input="two @L2",
                                                previous_response_id=first.id)
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(timeout=10)
        server.client.close()
        assert not _segments(tmp_path / "sessions.db")  # the two turns wait for a reader
        started = time.monotonic()
        server = Server(tmp_path, engine.base_url, log, hcp=hcp)
        third = server.client.responses.create(model="mol", input="three @L1",
                                               previous_response_id=second.id)
        server.kill()
    assert time.monotonic() - started < 60 and third.output_text == "L1 answered"
    summaries = _summaries(engine)
    assert len(summaries) == 1
    body = summaries[0]["body"]["messages"][-1]["content"]
    assert "one @L2" in body and "two @L2" in body
    assert "[L2] segment summary" in json.dumps(engine.requests_for("L1")[-1]["body"]["messages"])
    assert [s["turns"] for s in _segments(tmp_path / "sessions.db")] == [[0, 1]]


def test_a_fork_from_before_a_segments_summary_summarizes_its_turns_anew():
    from mol.runtime import Conversation, TurnRecord, open_segments
    from mol.server.turns.marks import fork, mark_of

    conversation = Conversation()
    for index in (0, 1):
        conversation.commit("L2", [{"role": "user", "content": f"t{index}"},
                                   {"role": "assistant", "content": "done"}])
        conversation.turns.append(TurnRecord(index=index, adapter="L2", user=f"t{index}",
                                             answer="done"))
    mark = mark_of(conversation)
    # Later the segment was summarized (another adapter was about to answer).
    conversation.segments.append({"adapter": "L2", "turns": [0, 1], "summary": "s",
                                  "ok": True})
    conversation.share_summary("L2", "s", ["L0", "L1", "L2"], "t0\n\nt1")
    assert open_segments(conversation) == []
    branch = fork(conversation, mark)
    assert branch.segments == [] and branch.pending == {}
    assert [[t.index for t in run] for run in open_segments(branch)] == [[0, 1]]
    assert fork(conversation, mark_of(conversation)).segments == conversation.segments


@pytest.fixture(autouse=True)
def _no_litellm_network(monkeypatch):
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
