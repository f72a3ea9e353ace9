"""A ``mol eval run`` killed with SIGKILL mid-run: the rerun does only what is missing."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mol.eval.store import Store
from mol.runtime.testing import ScriptedEngine
from mol.sandboxes import docker
from mol.sandboxes.owner import LABEL, OWNER

from .conftest import PASS, hcp_text, write_task

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TASKS = 6

SCRIPT = """
[[L0]]
constrained = true
times = -1
reply = "L2"
[[L0]]
constrained = false
times = -1
reply = "Summary."
[[L2]]
when = "step done"
times = -1
reply = "Finished."
[[L2]]
when = "Task number"
times = -1
delay = 1.5
tool_calls = [{ name = "terminal", arguments = { command = "echo step done" } }]
"""


def stored(run: Path) -> dict[tuple[str, int], float]:
    """(task, epoch) -> started, read the way another process would."""
    if not (run / "results.db").exists():
        return {}
    with sqlite3.connect(f"file:{run / 'results.db'}?mode=ro", uri=True) as db:
        try:
            return {(t, e): s for t, e, s in db.execute("SELECT task, epoch, started "
                                                         "FROM episodes")}
        except sqlite3.OperationalError:  # the schema is not there yet
            return {}


def test_sigkill_mid_run_then_rerun_finishes_only_the_missing_episodes(tmp_path: Path) -> None:
    for n in range(TASKS):
        write_task(tmp_path / "suite", f"task-{n}", test=PASS, instruction=f"Task number {n}.\n")
    hcp = tmp_path / "mol.toml"
    hcp.write_text(hcp_text("[engine]\nmax_retries = 0\n[adapters.L2]\nprompt = \"You code.\"\n"
                            "tools.allow = [\"terminal\"]\n"))
    run = tmp_path / "run"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with ScriptedEngine.serve(SCRIPT) as engine:
        command = [sys.executable, "-m", "mol.cli", "eval", "run", str(tmp_path / "suite"),
                   "--hcp", str(hcp), "--engine-url", engine.base_url, "--out", str(run),
                   "-j", "2"]
        first = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE)
        deadline = time.monotonic() + 180
        while len(stored(run)) < 2:
            assert first.poll() is None, first.stderr.read().decode() if first.stderr else ""
            assert time.monotonic() < deadline, "no two episodes finished in time"
            time.sleep(0.1)
        first.send_signal(signal.SIGKILL)
        first.wait()
        first.stderr.close()
        before = stored(run)
        assert 2 <= len(before) < TASKS
        asked = len(engine.requests)
        second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        assert second.returncode == 0, second.stderr
        missing = TASKS - len(before)
        assert (f"{missing} episodes to run ({TASKS} tasks x 1 epoch, {len(before)} stored)"
                in second.stderr)
        rerun = {r["body"]["messages"][-1]["content"] for r in engine.requests[asked:]
                 if r["adapter"] == "L2" and r["body"]["messages"][-1]["role"] == "user"}
    after = stored(run)
    assert set(after) == {(f"task-{n}", 1) for n in range(TASKS)}
    assert {key: after[key] for key in before} == before  # finished ones were not rerun
    assert rerun == {f"Task number {n}.\n" for n in range(TASKS)
                     if (f"task-{n}", 1) not in before}
    with Store(run, create=False) as store:
        assert store.integrity() == "ok"
        assert all(e.outcome == "pass" for e in store.episodes())
        assert all((run / e.trajectory).is_file() for e in store.episodes())
    # The killed run's sandboxes were removed by the rerun.
    left = [c for c in docker.list_containers(LABEL)
            if f"/{first.pid}/" in c.get("Labels", {}).get(OWNER, "")]
    assert left == []

