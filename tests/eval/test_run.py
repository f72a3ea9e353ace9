"""``mol eval run`` of the example suite: oracle, scripted engine, replay, reruns.

One oracle run and one scripted run (``-j 4``, conftest.py) serve the whole module.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mol.eval.store import Store
from mol.eval.trajectories.format import read
from mol.runtime.testing import ScriptedEngine

from .conftest import HCP, L1_TASKS, SCRIPTED_OUTCOMES, SUITE, mol, mol_json

pytestmark = pytest.mark.docker


def episodes(run: Path) -> dict[str, Any]:
    with Store(run, create=False) as store:
        return {e.task: e for e in store.episodes()}


def test_the_oracle_passes_every_example_task(oracle_run: Path,
                                              capsys: pytest.CaptureFixture) -> None:
    data = mol_json(capsys, "eval", "show", oracle_run)
    assert (data["episodes"], data["passed"], data["pass_rate"]) == (8, 8, 1.0)
    assert data["meta"]["agent"] == "oracle"
    assert all(e.reads == ["/sandbox"] for e in episodes(oracle_run).values())


def test_the_scripted_engine_gives_exactly_the_scripted_outcomes(scripted_run: Path) -> None:
    found = episodes(scripted_run)
    assert {task: e.outcome for task, e in found.items()} == SCRIPTED_OUTCOMES
    for task, e in found.items():
        assert e.steps >= 2 and e.prompt_tokens > 0 and e.completion_tokens > 0, task
        assert e.reason == ("" if e.outcome == "pass" else "reward"), task
        answered = "/adapters/L1" if task in L1_TASKS else "/adapters/L2"
        other = "/adapters/L2" if task in L1_TASKS else "/adapters/L1"
        assert answered in e.reads and other not in e.reads, task
        assert {"/router", "/summary", "/hooks", "/sandbox"} <= set(e.reads), task


def test_a_trajectory_holds_the_episode_in_order(scripted_run: Path) -> None:
    row = episodes(scripted_run)["find-todo"]
    trajectory = read(scripted_run / row.trajectory)
    assert trajectory.header["task"] == "find-todo" and trajectory.header["agent"] == "mol"
    engine = trajectory.of("engine")
    assert [r["purpose"] for r in engine] == ["route", "answer", "answer", "summary"]
    assert engine[0]["request"]["choices"] == ["L0", "L1", "L2"]
    assert engine[1]["reply"]["finish_reason"] == "tool_calls"
    # The reply's two calls ran at once; their records keep the reply's order.
    tools = trajectory.of("tool")
    assert [t["arguments"]["command"][:9] for t in tools] == ["(cd src &", "ls src; e"]
    assert [t["call_id"] for t in tools] == [f"call_L2_{n:024x}" for n in (1, 2)]
    assert tools[1]["sandbox"][0]["op"] == "run"
    assert "[[done:find-todo:1]]" in tools[1]["sandbox"][0]["output"]
    assert trajectory.of("verifier")[0]["reward"] == 1.0
    result = trajectory.result
    assert (result["outcome"], result["steps"], result["reads"]) == ("pass", 2, row.reads)
    kinds = [r["kind"] for r in trajectory.records]
    assert kinds[0] == "episode" and kinds[-1] == "result"
    assert "sandbox" in kinds and kinds.index("verifier") > kinds.index("engine")


def test_replaying_the_run_under_its_own_hcp_is_identical(scripted_run: Path,
                                                          capsys: pytest.CaptureFixture) -> None:
    data = mol_json(capsys, "eval", "replay", scripted_run)
    assert data["identical"] == 8 and "diverged" not in data
    assert all(e["requests"] == e["recorded"] >= 4 for e in data["episodes"])


def test_an_edited_adapter_prompt_diverges_exactly_where_it_was_used(
        scripted_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    text = HCP.read_text().replace("You are the agent.", "You are the careful agent.")
    edited = tmp_path / "edited.toml"
    edited.write_text(text)
    data = mol_json(capsys, "eval", "replay", scripted_run, "--hcp", edited)
    verdicts = {e["task"]: e for e in data["episodes"]}
    assert {t for t, e in verdicts.items() if e["verdict"] == "diverged"} == L1_TASKS
    for task in L1_TASKS:
        divergence = verdicts[task]["divergence"]
        assert (divergence["request"], divergence["hop"], divergence["adapter"],
                divergence["where"]) == (2, "answer", "L1", "messages[0] (system)")
        assert "+You are the careful agent." in divergence["diff"]
    code, out, _ = mol(capsys, "eval", "replay", scripted_run, "--hcp", edited)
    assert code == 0 and "3 diverged, 5 identical" in out
    assert "git-tag-release #1: diverged at request 2 (answer, L1), messages[0] (system)" in out


def test_a_rerun_skips_every_finished_episode(scripted_run: Path, engine: ScriptedEngine,
                                              capsys: pytest.CaptureFixture) -> None:
    before = {t: e.started for t, e in episodes(scripted_run).items()}
    requests = len(engine.requests)
    code, _, err = mol(capsys, "eval", "run", SUITE, "--hcp", HCP, "--engine-url",
                       engine.base_url, "--out", scripted_run)
    assert code == 0 and "0 episodes to run (8 tasks x 1 epoch, 8 stored)" in err
    assert {t: e.started for t, e in episodes(scripted_run).items()} == before
    assert len(engine.requests) == requests


def test_json_output_is_one_line_per_episode_then_the_summary(
        tmp_path: Path, engine: ScriptedEngine, capsys: pytest.CaptureFixture) -> None:
    lines = mol_json(capsys, "eval", "run", SUITE, "--hcp", HCP, "--engine-url",
                     engine.base_url, "--out", tmp_path / "run", "--tasks", "csv*",
                     "--epochs", "2", "-j", "2")
    assert [line["type"] for line in lines] == ["episode", "episode", "summary"]
    assert {(line["task"], line["epoch"]) for line in lines[:2]} == {("csv-to-json", 1),
                                                                    ("csv-to-json", 2)}
    assert all(line["outcome"] == "pass" and line["trajectory"] for line in lines[:2])
    assert lines[2]["passed"] == 2 and lines[2]["tasks"][0]["task"] == "csv-to-json"
    json.dumps(lines)  # stays JSON-able


def test_a_run_refuses_an_engine_missing_an_adapter(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture) -> None:
    """Before its first episode; a run with nothing to do, or the oracle, never asks."""
    with ScriptedEngine.serve('[[L0]]\nreply = "x"\n', served=["L0", "L1", "L2"]) as engine:
        code, _, err = mol(capsys, "eval", "run", SUITE, "--hcp", HCP, "--engine-url",
                           engine.base_url, "--out", tmp_path / "run", "--tasks", "csv*")
        assert code == 1 and engine.requests == []
        assert err.strip().splitlines()[-1] == (
            f"error: the engine at {engine.base_url}/models does not serve the artifact's "
            "adapters: L3 (engine name L3) is not served by the engine (check with "
            "'mol engine check'; --no-engine-check starts anyway)")
        assert episodes(tmp_path / "run") == {}
        code, _, err = mol(capsys, "eval", "run", SUITE, "--hcp", HCP, "--engine-url",
                           engine.base_url, "--out", tmp_path / "oracle", "--tasks", "csv*",
                           "--agent", "oracle")
        assert code == 0, err
