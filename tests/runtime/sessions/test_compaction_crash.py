"""A compaction is one transaction: ``mol run --session`` SIGKILLed while the summary is
being written, or right after the compaction was stored, leaves the stored session's view
as it was before or as it is after (never between), and the next run goes on from it; on
SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from mol.runtime.testing import ScriptedEngine
from tests.conftest import hcp_text

pytestmark = pytest.mark.slow

SCRIPT = """
[[L0]]
constrained = true
times = -1
reply = "L0"
[[L0]]
when = "conversation is about to be shortened"
delay = {summary_delay}
times = -1
reply = "Summary: many Greek letters."
[[L0]]
constrained = false
when = "^User: "
times = -1
reply = "summary"
[[L0]]
when = "^last"
delay = {answer_delay}
times = -1
reply = "Last answer."
[[L0]]
times = -1
reply = "Noted."
"""


def artifact(tmp_path, store: str) -> str:
    path = tmp_path / "crash.toml"
    path.write_text(hcp_text(f"""\
[engine]
api_base = "http://127.0.0.1:9/v1"
routing_constraint = "structured_outputs"
max_retries = 0
[adapters.L0]
prompt = "You chat."
context_window = 2048
[adapters.L1]
prompt = "You act."
[adapters.L2]
prompt = "You code."
[adapters.L3]
prompt = "You draw."
[session]
store = "{store}"
"""))
    return str(path)


def mol(*args: str, engine: ScriptedEngine) -> subprocess.CompletedProcess:
    env = {**os.environ, "MOL_ENGINE_URL": engine.base_url}
    return subprocess.run(["mol", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def started(*args: str, engine: ScriptedEngine) -> subprocess.Popen:
    env = {**os.environ, "MOL_ENGINE_URL": engine.base_url}
    return subprocess.Popen(["mol", *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def stored(hcp: str, engine: ScriptedEngine) -> dict:
    shown = mol("sessions", "show", "talk", "--hcp", hcp, "--json", engine=engine)
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def words(n: int, count: int = 300) -> str:
    greek = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    return " ".join(greek[(i * 7 + n) % 8] for i in range(count))


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'sessions.db'}"
    return request.getfixturevalue("postgres_url")


@pytest.mark.parametrize("when", ["while summarizing", "after storing"])
def test_a_run_killed_during_a_compaction_leaves_the_view_whole(tmp_path, store, when):
    delays = ({"summary_delay": 60, "answer_delay": 0} if when == "while summarizing"
              else {"summary_delay": 0, "answer_delay": 60})
    hcp = artifact(tmp_path, store)
    with ScriptedEngine.serve(SCRIPT.format(**delays), context_window=2048) as engine:
        for n in range(3):  # fills L0's window short of its threshold
            run = mol("run", "--hcp", hcp, "--session", "talk", f"hello {words(n)}",
                      engine=engine)
            assert run.returncode == 0, run.stderr
        before = stored(hcp, engine)
        assert not before["compactions"]
        killed = started("run", "--hcp", hcp, "--session", "talk", f"last {words(9, 800)}",
                         engine=engine)
        waited = "conversation is about to be shortened" if delays["summary_delay"] else "^last"
        deadline = time.monotonic() + 90
        while not any(waited.strip("^") in json.dumps(r["body"]["messages"][-2:])
                      for r in engine.requests[-3:]):
            assert time.monotonic() < deadline and killed.poll() is None
            time.sleep(0.05)
        time.sleep(0.5)  # the request is in flight: nothing after it has happened
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
        after = stored(hcp, engine)
        views = {a: len(v) for a, v in after["views"].items()}
        if when == "while summarizing":  # the view as it was
            assert after["compactions"] == {} and views == {a: len(v) for a, v in
                                                            before["views"].items()}
        else:  # the compaction and the view it stands for, whole
            [compaction] = after["compactions"]["L0"]
            assert compaction["summary"] == "Summary: many Greek letters."
            assert compaction["keep_from"] <= views["L0"] == compaction["at"]
        going_on = mol("run", "--hcp", hcp, "--session", "talk", "hello again",
                       engine=engine)
    assert going_on.returncode == 0, going_on.stderr
    assert going_on.stdout.strip() == "Noted."
    final = [r["body"]["messages"] for r in engine.requests if r["adapter"] == "L0"
             and r["body"]["messages"][-1]["content"] == "hello again"][-1]
    if when == "after storing":  # it goes on from the compacted view
        assert final[1]["content"].startswith("[Context: a summary of the earlier part")
    else:  # from the view as it was: every message of it, then the new turn
        first = before["views"]["L0"]
        assert final[:len(first)] == first
    assert all(r["status"] == 200 for r in engine.requests)
