"""`mol run` and `mol chat` as a user runs them, against the scripted engine over HTTP."""

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from mol.runtime.testing import ScriptedEngine

from .conftest import BASE_HCP

SCRIPT = """
[[L0]]
constrained = true
when = "first"
reply = "L0"
[[L0]]
constrained = true
when = "second"
reply = "L3"
[[L0]]
constrained = false
when = "first"
reply = "first answer"
[[L3]]
reply = "<Card/>"
[[L0]]
constrained = false
times = -1
reply = "summary"
"""


def run(*args, stdin=None, env=None):
    environ = {**os.environ, **(env or {})}
    # This interpreter's mol (the code under test), not whichever `mol` PATH finds.
    return subprocess.run([sys.executable, "-m", "mol.cli", *args], input=stdin,
                          capture_output=True, text=True, env=environ, timeout=120)


def test_chat_reads_one_turn_per_line_and_prints_one_answer_each(tmp_path):
    hcp = tmp_path / "t.toml"
    hcp.write_text(BASE_HCP.format(constraint="structured_outputs", timeout=30))
    with ScriptedEngine.serve(SCRIPT) as engine:
        out = run("chat", "--hcp", str(hcp), stdin="the first turn\n\nthe second turn\n",
                  env={"MOL_ENGINE_URL": engine.base_url})
    assert out.returncode == 0, out.stderr
    assert out.stdout == "first answer\n<Card/>\n"
    # The second turn's L3 view never saw L0's first answer, only its summary.
    l3 = engine.requests_for("L3")[0]["body"]["messages"]
    assert "first answer" not in str(l3) and "[L0] summary" in l3[1]["content"]


def test_run_needs_an_artifact():
    out = run("run", "hello", env={"MOL_HCP": ""})
    assert out.returncode == 2
    assert "no HCP artifact: pass --hcp FILE or set MOL_HCP" in out.stderr


def test_engine_down_is_a_clear_error(tmp_path):
    hcp = tmp_path / "t.toml"
    hcp.write_text(BASE_HCP.format(constraint="structured_outputs", timeout=5))
    out = run("run", "--hcp", str(hcp), "--engine-url", "http://127.0.0.1:9/v1", "hello")
    assert out.returncode == 1  # the adapter check at the start names the URL it asked
    assert out.stderr.startswith("error: the engine's model list GET "
                                 "http://127.0.0.1:9/v1/models got no answer: ConnectError")
    assert "Traceback" not in out.stderr
    out = run("run", "--hcp", str(hcp), "--engine-url", "http://127.0.0.1:9/v1",
              "--no-engine-check", "hello")
    assert out.returncode == 1
    assert out.stderr.startswith("error: hosted_vllm/L0:") and "Traceback" not in out.stderr


@pytest.mark.slow
def test_run_and_chat_expand_a_bundles_slash_command(tmp_path):
    bundle = Path(__file__).resolve().parents[1] / "hcp" / "fixtures" / "demo-plugin"
    hcp = tmp_path / "t.toml"
    hcp.write_text(BASE_HCP.format(constraint="structured_outputs", timeout=30).replace(
        'prompt = "You code."', 'prompt = "You code."\nbundles = ["demo"]')
        + f'[bundles]\npaths = ["{bundle.as_posix()}"]\n')
    script = """
[[L2]]
when = "Review a.py with a focus on speed"
reply = "reviewed a.py"
[[L2]]
when = "Review b.py with a focus on \\\\."
reply = "reviewed b.py"
[[L0]]
constrained = false
times = -1
reply = "summary"
"""
    with ScriptedEngine.serve(script) as engine:
        env = {"MOL_ENGINE_URL": engine.base_url}
        ran = run("run", "--hcp", str(hcp), "/review a.py speed", env=env)
        chatted = run("chat", "--hcp", str(hcp), stdin="/demo:review b.py\n", env=env)
    assert (ran.returncode, ran.stdout) == (0, "reviewed a.py\n"), ran.stderr
    assert (chatted.returncode, chatted.stdout) == (0, "reviewed b.py\n"), chatted.stderr
    assert f"warning: 1 thing in {hcp} load with a warning" in ran.stderr
    first = engine.requests_for("L2")[0]["body"]
    # allowed-tools narrowed the turn to the bundle's MCP tool (echo is no tool of mol run's).
    assert [t["function"]["name"] for t in first["tools"]] == ["mcp__plugin_demo_notes__add_note"]
    assert not any(r["body"].get("structured_outputs") for r in engine.requests_for("L0"))


DEFERRED = """
[[L0]]
constrained = true
when = "code"
times = -1
reply = "L2"
[[L0]]
constrained = true
times = -1
reply = "L1"
[[L0]]
constrained = false
times = -1
reply = "L2 worked on code twice."
[[L2]]
times = -1
reply = "coded"
[[L1]]
times = -1
reply = "acted"
"""


def test_chat_with_a_session_writes_its_deferred_summaries_when_the_person_leaves(tmp_path):
    hcp = tmp_path / "mol.toml"
    store = tmp_path / "sessions.db"
    hcp.write_text(BASE_HCP.format(constraint="structured_outputs", timeout=30)
                   + f'[summary]\nwhen = "deferred"\n[session]\nstore = "sqlite:///{store}"\n')
    with ScriptedEngine.serve(DEFERRED) as engine:
        url = ["--engine-url", engine.base_url]
        out = run("chat", "--hcp", str(hcp), *url, "--session", "s1",
                  stdin="write code\nmore code\n")
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["coded", "coded"]
        with sqlite3.connect(store) as db:
            [(state,)] = db.execute("SELECT state FROM sessions").fetchall()
        assert json.loads(state)["segments"] == [{"adapter": "L2", "turns": [0, 1], "ok": True,
                                                  "summary": "[L2] L2 worked on code twice."}]
        summaries = [r for r in engine.requests_for("L0") if r["constraint"] is None]
        assert len(summaries) == 1  # at exit, for both turns
        # mol run --session: one turn of a conversation that goes on; nothing at exit.
        out = run("run", "--hcp", str(hcp), *url, "--session", "s1", "act now")
        assert out.returncode == 0 and out.stdout.strip() == "acted"
        out = run("run", "--hcp", str(hcp), *url, "--session", "s1", "code again")
        assert out.returncode == 0 and out.stdout.strip() == "coded"
    summaries = [r for r in engine.requests_for("L0") if r["constraint"] is None]
    assert len(summaries) == 2  # L1's turn, once L2 was about to answer
    assert "act now" in summaries[1]["body"]["messages"][-1]["content"]
