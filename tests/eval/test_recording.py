"""What a trajectory records, in the same bytes every time, and MCP calls and hook verdicts
among it; the Recorder's ordering of calls that ran at once."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from mol.core import events as ev
from mol.eval.episode import run_episode
from mol.eval.images import ensure_image
from mol.eval.tasks import load_suite, load_task
from mol.eval.trajectories.format import parse
from mol.eval.trajectories.recording import Recorder
from mol.hcp.loader import load, load_text
from mol.runtime.engine import LiteLLMEngine
from mol.runtime.testing import ScriptedEngine

from .conftest import HCP, PASS, SCRIPT, SUITE, hcp_text, write_task

MCP_SERVER = Path(__file__).resolve().parents[1] / "runtime" / "mcp" / "servers" / \
    "scripted_server.py"


def test_records_of_calls_that_ran_at_once_keep_the_replys_order() -> None:
    recorder = Recorder()
    exchange = recorder.exchange({"adapter": "L2", "messages": []})
    exchange["reply"] = {"tool_calls": [{"name": "a", "arguments": "{}"},
                                        {"name": "b", "arguments": "{}"}]}
    # b started and finished first.
    recorder.on_event(ev.ToolCalled("L2", "call_L2_2", "b", "{}"))
    recorder.on_event(ev.ToolCalled("L2", "call_L2_1", "a", "{}"))
    recorder.add({"kind": "tool", "call_id": "call_L2_2", "name": "b"})
    recorder.on_event(ev.ToolReturned("L2", "call_L2_2", "b", "B", False))
    recorder.on_event(ev.HookDecided("hook", "a", "allow", "", call_id="call_L2_1"))
    recorder.add({"kind": "tool", "call_id": "call_L2_1", "name": "a"})
    recorder.on_event(ev.ToolReturned("L2", "call_L2_1", "a", "A", False))
    recorder.on_event(ev.Answered("L2", "done"))
    records = parse(['{"kind":"episode","format":1}', *recorder.finish()]).records[1:]
    names = [(r["kind"], r.get("name") or r.get("event", {}).get("name")
              or r.get("event", {}).get("tool")) for r in records]
    assert names == [("engine", None), ("event", "a"), ("event", "a"), ("tool", "a"),
                     ("event", "a"), ("event", "b"), ("tool", "b"), ("event", "b"),
                     ("event", None)]


@pytest.mark.docker
def test_an_episode_records_the_same_bytes_every_time() -> None:
    task = next(t for t in load_suite(SUITE) if t.name == "find-todo")
    artifact = load(HCP)

    async def once() -> list[str]:
        image = await ensure_image(task, artifact.doc.sandbox.image)
        async with ScriptedEngine.serve(SCRIPT) as engine:  # a fresh engine each time
            episode = await run_episode(task, artifact, image=image, engine=LiteLLMEngine
                                        .from_artifact(artifact, engine.base_url))
        assert episode.outcome == "pass"
        return episode.lines or []

    first, second = anyio.run(once), anyio.run(once)
    assert len(first) > 10 and first == second


SCRIPTED_MCP = """
[[L0]]
constrained = true
times = -1
reply = "L1"
[[L0]]
constrained = false
times = -1
reply = "Summary."
[[L1]]
when = "via terminal"
times = -1
reply = "Both done."
[[L1]]
when = "echo server"
times = -1
tool_calls = [{ name = "mcp__scripted__echo", arguments = { text = "hello from mcp" } },
              { name = "terminal", arguments = { command = "echo via terminal" } }]
"""


def mcp_hcp(tmp_path: Path, servers: str = '["scripted"]', extra: str = "") -> str:
    hook = tmp_path / "allow.py"
    hook.write_text('print(\'{"decision": "allow", "reason": "checked"}\')\n')
    return hcp_text(f"""
[engine]
api_base = "http://127.0.0.1:9/v1"
max_retries = 0
[adapters.L1]
prompt = "You act."
tools.allow = ["terminal", "mcp__*"]
mcp_servers = {servers}
[mcp_servers.scripted]
command = "{sys.executable}"
args = ["{MCP_SERVER}"]
env_vars = ["MOL_TEST_LOG"]
startup_timeout_sec = 60
{extra}
[[hooks.PreToolUse]]
matcher = "terminal"
hooks = [{{ command = "{sys.executable} {hook}" }}]
""")


@pytest.mark.docker
def test_mcp_calls_and_hook_verdicts_are_recorded_and_replayed_without_the_server(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "mcp.log"
    monkeypatch.setenv("MOL_TEST_LOG", str(log))
    folder = write_task(tmp_path / "suite", "mcp", test=PASS,
                        instruction="Use the echo server and the terminal.\n")
    hcp = tmp_path / "mol.toml"
    hcp.write_text(mcp_hcp(tmp_path))
    artifact = load(hcp)

    async def run() -> list[str]:
        async with ScriptedEngine.serve(SCRIPTED_MCP) as engine:
            episode = await run_episode(load_task(folder), artifact, engine=LiteLLMEngine
                                        .from_artifact(artifact, engine.base_url))
        assert (episode.outcome, episode.error) == ("pass", "")
        assert {"/mcp_servers/scripted", "/hooks", "/adapters/L1"} <= set(episode.reads)
        return episode.lines or []

    trajectory = parse(anyio.run(run))
    catalog = trajectory.catalog()["L1"]
    assert {t["source"] for t in catalog} == {"mcp:scripted"}
    assert "mcp__scripted__echo" in {t["name"] for t in catalog}
    mcp_call, terminal = trajectory.of("tool")
    assert (mcp_call["name"], mcp_call["source"], mcp_call["arguments"]) == (
        "mcp__scripted__echo", "mcp:scripted", {"text": "hello from mcp"})
    assert mcp_call["result"] == {"content": "hello from mcp", "is_error": False}
    assert terminal["sandbox"][0]["output"] == "via terminal\n"
    hooks = [r["event"] for r in trajectory.of("event") if r["event"]["type"] == "hook"]
    assert [(h["decision"], h["reason"], h["call_id"]) for h in hooks] == [
        ("allow", "checked", terminal["call_id"])]
    assert log.read_text().count("call echo hello from mcp") == 1

    # Replays never start the server; a changed server list diverges where it shows.
    from mol.eval.trajectories.replay import replay_episode

    same = anyio.run(replay_episode, trajectory, artifact)
    assert same.verdict == "identical" and same.requests == same.recorded == 4
    assert log.read_text().count("call echo") == 1
    fewer = load_text(mcp_hcp(tmp_path, "[]"), base_dir=tmp_path)
    result = anyio.run(replay_episode, trajectory, fewer)
    assert (result.verdict, result.divergence.where) == ("diverged", "messages[0] (system)")
    more = load_text(mcp_hcp(tmp_path, '["scripted", "other"]',
                             f'[mcp_servers.other]\ncommand = "{sys.executable}"'),
                     base_dir=tmp_path)
    result = anyio.run(replay_episode, trajectory, more)
    assert result.verdict == "diverged"
    assert (result.divergence.request, result.divergence.where) == (
        2, "adapters.L1.mcp_servers")
    assert "no tools of ['other']" in result.divergence.diff


COMPACTING = """
[[L0]]
constrained = true
times = -1
reply = "L1"
[[L0]]
constrained = false
times = -1
reply = "Summary."
[[L1]]
when = "conversation is about to be shortened"
times = -1
reply = "Summary: counted to 200, several times."
[[L1]]
when = "^Count"
tool_calls = [{ name = "terminal", arguments = { command = "seq 1 200" } }]
[[L1]]
when = "^1\\\\n2\\\\n"
times = 7
tool_calls = [{ name = "terminal", arguments = { command = "seq 1 200" } }]
[[L1]]
times = -1
reply = "Counted."
"""


@pytest.mark.docker
def test_a_compaction_mid_turn_is_recorded_and_replayed(tmp_path: Path) -> None:
    folder = write_task(tmp_path / "suite", "count", test=PASS,
                        instruction="Count to 200 eight times.\n")
    hcp = tmp_path / "mol.toml"
    hcp.write_text(hcp_text("""
[engine]
api_base = "http://127.0.0.1:9/v1"
max_retries = 0
[adapters.L1]
prompt = "You act."
tools.allow = ["terminal"]
max_steps = 20
"""))
    artifact = load(hcp)

    async def run() -> list[str]:
        async with ScriptedEngine.serve(COMPACTING, context_window=2048) as engine:
            episode = await run_episode(load_task(folder), artifact, engine=LiteLLMEngine
                                        .from_artifact(artifact, engine.base_url))
            assert all(r["status"] == 200 for r in engine.requests)
        assert (episode.outcome, episode.error) == ("pass", "")
        return episode.lines or []

    trajectory = parse(anyio.run(run))
    kinds = [r["event"]["type"] for r in trajectory.of("event")]
    assert "compacting" in kinds and "compaction" in kinds
    [listed] = trajectory.of("models")
    assert {m["max_model_len"] for m in listed["data"]} == {2048}
    asked = [r for r in trajectory.of("engine")
             if "conversation is about to be shortened" in str(r["request"]["messages"][-1:])]
    assert asked

    from mol.eval.trajectories.replay import replay_episode

    same = anyio.run(replay_episode, trajectory, artifact)
    assert same.verdict == "identical" and same.requests == same.recorded


SPECULATING = """schema_version = 1
name = "speculating"
[router]
prompt = "Route the turn."
speculate = "{speculate}"
[engine]
api_base = "http://127.0.0.1:9/v1"
model_prefix = "hosted_vllm/"
max_retries = 0
[adapters.L0]
prompt = "You chat."
[adapters.L1]
prompt = "You act."
[adapters.L2]
prompt = "You code."
"""
ROUTED = """
[[L0]]
constrained = true
when = "@L1"
times = -1
delay = 0.2
reply = "L1"
[[L0]]
constrained = true
times = -1
delay = 0.2
reply = "L2"
[[L1]]
when_system = "^Summarize"
times = -1
reply = "summary"
[[L2]]
when_system = "^Summarize"
times = -1
reply = "summary"
[[L2]]
times = -1
reply = "L2 answered"
[[L1]]
times = -1
reply = "L1 answered"
"""


@pytest.mark.anyio
async def test_a_recorded_session_never_guesses_so_its_trajectory_is_the_same(tmp_path) -> None:
    from mol.eval.trajectories.recording import RecordingEngine
    from mol.plugins.manager import PluginManager
    from mol.runtime import Runtime

    async def recorded(speculate: str) -> list[str]:
        (tmp_path / "mol.toml").write_text(SPECULATING.format(speculate=speculate))
        artifact = load(tmp_path / "mol.toml")
        recorder = Recorder()
        async with ScriptedEngine.serve(ROUTED) as engine:
            inner = LiteLLMEngine.from_artifact(artifact, engine.base_url)
            runtime = Runtime(artifact, engine=RecordingEngine(inner, recorder),
                              plugins=PluginManager(None, builtin=()))
            async with runtime.session(observers=[recorder.on_event]) as session:
                for text in ("first @L2", "second @L2", "third @L1"):
                    await session.turn(text, stream=True)
            assert not [r for r in engine.requests if r.get("cancelled")]
        return recorder.finish()

    off, sticky = await recorded("off"), await recorded("sticky")
    assert len(off) > 10 and sticky == off
    assert '"speculation"' not in "".join(sticky)
