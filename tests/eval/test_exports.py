"""``mol eval export`` of the example suite's runs (conftest.py): ATIF trajectories that
Harbor's own models accept, and per-adapter training data equal to what the engine got;
``mol eval show --json``'s per-episode results."""

from __future__ import annotations

import hashlib
import json
import typing
from pathlib import Path
from typing import Any

import pytest

from mol.eval.exports.atif import ATIF_VERSION, to_atif
from mol.eval.store import Episode
from mol.eval.trajectories.format import FORMAT, Trajectory
from mol.runtime.testing import ScriptedEngine

from .conftest import L1_TASKS, SCRIPTED_OUTCOMES, mol, mol_json, trajectory_model


def canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, ensure_ascii=False).encode("utf-8")


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.harbor
def test_the_atif_version_is_the_newest_harbor_validates() -> None:
    field = trajectory_model().model_fields["schema_version"]
    assert ATIF_VERSION == field.default == typing.get_args(field.annotation)[-1]


@pytest.mark.docker
@pytest.mark.harbor
@pytest.mark.parametrize("which", ["oracle_run", "scripted_run"])
def test_every_episode_exported_as_atif_validates_with_harbors_model(
        which: str, request: pytest.FixtureRequest, tmp_path: Path,
        capsys: pytest.CaptureFixture) -> None:
    run = request.getfixturevalue(which)
    code, out, err = mol(capsys, "eval", "export", run, "--format", "atif", "--out",
                         tmp_path / "atif")
    assert code == 0, err
    assert out.startswith("wrote 8 ATIF trajectories")
    Trajectory = trajectory_model()
    rows = {row["task"]: row for row in mol_json(capsys, "eval", "show", run)["results"]}
    files = sorted((tmp_path / "atif").glob("*.json"))
    assert [f.name for f in files] == [f"{task}.1.json" for task in sorted(SCRIPTED_OUTCOMES)]
    for path in files:
        trajectory = Trajectory.model_validate_json(path.read_text())
        data = json.loads(path.read_text())
        task = data["extra"]["mol"]["task"]
        assert trajectory.schema_version == ATIF_VERSION
        assert data["extra"]["mol"]["reward"] == rows[task]["reward"]
        verifier = data["steps"][-1]
        assert verifier["extra"]["mol"] == {**verifier["extra"]["mol"], "hop": "verifier",
                                            "reward": rows[task]["reward"]}
        if which == "oracle_run":
            assert data["agent"]["name"] == "oracle"
            assert data["steps"][1]["llm_call_count"] == 0
            assert data["steps"][1]["tool_calls"][-1]["arguments"]["command"].endswith(
                "bash /solution/solve.sh")
            continue
        hops = [(s["extra"]["mol"]["hop"], s["extra"]["mol"].get("adapter"))
                for s in data["steps"]]
        answered = "L1" if task in L1_TASKS else "L2"
        assert hops[:2] == [("instruction", None), ("route", "L0")]
        assert ("answer", answered) in hops and ("summary", "L0") in hops
        route = data["steps"][1]
        assert route["extra"]["mol"]["events"][0]["adapter"] == answered
        assert route["metrics"]["prompt_tokens"] > 0
        answers = [s for s in data["steps"] if s["extra"]["mol"]["hop"] == "answer"]
        called = [c for s in answers for c in s.get("tool_calls", [])]
        results = [r for s in answers for r in (s.get("observation") or {"results": []})[
            "results"]]
        assert called and [r["source_call_id"] for r in results] == [
            c["tool_call_id"] for c in called]
        assert data["final_metrics"]["total_prompt_tokens"] == rows[task]["tokens"]["prompt"]


@pytest.mark.docker
def test_sft_examples_are_the_request_bodies_the_engine_logged(
        scripted_run: Path, engine: ScriptedEngine, tmp_path: Path,
        capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "l2.jsonl"
    code, _, err = mol(capsys, "eval", "export", scripted_run, "--format", "sft",
                       "--adapter", "L2", "--out", out)
    assert code == 0, err
    examples = lines(out)
    l2_tasks = {t for t in SCRIPTED_OUTCOMES if t not in L1_TASKS}
    assert {e["mol"]["task"] for e in examples} == l2_tasks
    bodies = [r["body"] for r in engine.requests_for("L2") if isinstance(r["body"], dict)]
    for example in examples:
        # The task's last L2 request (deduplicated: the earlier steps are its prefixes).
        asked = max((b for b in bodies if b["messages"][1] == example["messages"][1]),
                    key=lambda b: len(b["messages"]))
        assert canonical(example["messages"][:-1]) == canonical(asked["messages"])
        assert canonical(example["tools"]) == canonical(asked["tools"])
        assert example["messages"][-1]["role"] == "assistant"
        assert example["mol"]["kind"] == "answer"
    manifest = json.loads((tmp_path / "l2.manifest.json").read_text())
    assert manifest["source"]["run"] == str(scripted_run.resolve())
    assert manifest["source"]["hcp_digest"].startswith("sha256:")
    assert manifest["examples"] == len(examples) == 5
    assert manifest["sha256"] == "sha256:" + hashlib.sha256(out.read_bytes()).hexdigest()


@pytest.mark.docker
def test_sft_keeps_every_step_with_keep_prefixes_and_filters_by_outcome(
        scripted_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    every = tmp_path / "every.jsonl"
    assert mol(capsys, "eval", "export", scripted_run, "--format", "sft", "--adapter", "L2",
               "--out", every, "--keep-prefixes")[0] == 0
    steps = lines(every)
    csv = [e for e in steps if e["mol"]["task"] == "csv-to-json"]
    assert [e["mol"]["step"] for e in csv] == [1, 2, 3]
    assert csv[1]["messages"][:len(csv[0]["messages"])] == csv[0]["messages"]
    assert csv[0]["messages"][-1]["tool_calls"][0]["function"]["name"] == "write_file"
    passed = tmp_path / "passed.jsonl"
    assert mol(capsys, "eval", "export", scripted_run, "--format", "sft", "--adapter", "L2",
               "--out", passed, "--passed-only")[0] == 0
    kept = {e["mol"]["task"] for e in lines(passed)}
    assert kept == {t for t, o in SCRIPTED_OUTCOMES.items() if o == "pass"} - L1_TASKS
    manifest = json.loads((tmp_path / "passed.manifest.json").read_text())
    assert manifest["filters"] == {"passed_only": True, "min_reward": None, "dedup": True}
    assert manifest["episodes"] == {"used": 5, "left_out": {"not_passed": 3}}
    rewarded = tmp_path / "rewarded.jsonl"
    assert mol(capsys, "eval", "export", scripted_run, "--format", "sft", "--adapter", "L2",
               "--out", rewarded, "--min-reward", "1")[0] == 0
    assert {e["mol"]["task"] for e in lines(rewarded)} == kept


@pytest.mark.docker
def test_router_examples_carry_the_scripted_labels(scripted_run: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "l0.jsonl"
    assert mol(capsys, "eval", "export", scripted_run, "--format", "sft", "--adapter", "L0",
               "--out", out)[0] == 0
    routes = [e for e in lines(out) if e["mol"]["kind"] == "route"]
    assert {e["mol"]["task"]: e["mol"]["label"] for e in routes} == {
        t: "L1" if t in L1_TASKS else "L2" for t in SCRIPTED_OUTCOMES}
    for example in routes:
        assert example["messages"][-1] == {"role": "assistant",
                                           "content": example["mol"]["label"]}
        assert example["mol"]["led_to_success"] == (
            SCRIPTED_OUTCOMES[example["mol"]["task"]] == "pass")
        assert "<untrusted_turn>" in example["messages"][-2]["content"]


@pytest.mark.docker
def test_bad_export_input_gets_precise_errors(scripted_run: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture) -> None:
    def error(*argv: Any) -> str:
        code, _, err = mol(capsys, "eval", "export", *argv)
        assert code != 0
        return err

    assert f"{tmp_path / 'none'}: no such run folder" in error(
        tmp_path / "none", "--format", "atif", "--out", tmp_path / "a")
    assert f"{tmp_path}: not an eval run" in error(tmp_path, "--format", "atif", "--out",
                                                   tmp_path / "a")
    assert "--adapter L9: not an adapter of the HCP (L0, L1, L2, L3)" in error(
        scripted_run, "--format", "sft", "--adapter", "L9", "--out", tmp_path / "x.jsonl")
    assert "--format sft needs --adapter NAME" in error(scripted_run, "--format", "sft",
                                                       "--out", tmp_path / "x.jsonl")
    assert f"--out {tmp_path / 'no' / 'x.jsonl'}: no folder" in error(
        scripted_run, "--format", "sft", "--adapter", "L2", "--out", tmp_path / "no" / "x.jsonl")
    (tmp_path / "file").write_text("")
    assert f"--out {tmp_path / 'file'}: is a file, not a folder" in error(
        scripted_run, "--format", "atif", "--out", tmp_path / "file")
    assert "options of --format sft" in error(scripted_run, "--format", "atif", "--adapter",
                                              "L2", "--out", tmp_path / "a")
    assert not (tmp_path / "x.jsonl").exists() and not (tmp_path / "a").exists()


@pytest.mark.docker
def test_show_json_lists_every_episode_under_results(scripted_run: Path,
                                                     capsys: pytest.CaptureFixture) -> None:
    data = mol_json(capsys, "eval", "show", scripted_run)
    assert {"run", "meta", "tasks", "episodes", "passed", "pass_rate", "cost"} <= set(data)
    rows = data["results"]
    assert [(r["task"], r["epoch"], r["outcome"]) for r in rows] == [
        (t, 1, o) for t, o in sorted(SCRIPTED_OUTCOMES.items())]
    for row in rows:
        assert row["steps"] >= 2 and row["tokens"]["prompt"] > 0 and row["wall_sec"] > 0
        assert row["placement"] == "local" and row["trajectory"].endswith(".jsonl")
        assert (row["reward"], row["error"] == "") == ((1.0, True) if row["outcome"] == "pass"
                                                       else (0.0, False))


@pytest.mark.harbor
def test_an_episode_that_ended_in_an_engine_error_still_validates() -> None:
    call = "call_L2_000000000000000000000001"
    records = [
        {"kind": "episode", "format": FORMAT, "task": "t", "epoch": 1, "agent": "mol",
         "instruction": "do it", "mol_version": "0"},
        {"kind": "event", "event": {"type": "route", "adapter": "L2", "raw": "",
                                    "fallback": False, "reason": "", "route": "pinned"}},
        {"kind": "engine", "purpose": "answer", "request": {"adapter": "L2", "messages": []},
         "reply": {"content": "", "finish_reason": "tool_calls", "reasoning": "hmm",
                   "tool_calls": [], "usage": {"prompt_tokens": 9}}},
        {"kind": "event", "event": {"type": "tool_call", "adapter": "L2", "call_id": call,
                                    "name": "terminal", "arguments": "{not json"}},
        {"kind": "event", "event": {"type": "tool_result", "adapter": "L2", "call_id": call,
                                    "name": "terminal", "content": "bad arguments",
                                    "is_error": True}},
        {"kind": "engine", "purpose": "answer", "request": {"adapter": "L2", "messages": []},
         "error": {"type": "EngineError", "message": "down"}},
        {"kind": "event", "event": {"type": "error", "where": "engine", "message": "down"}},
        {"kind": "result", "outcome": "error", "reward": None, "tokens": {}},
    ]
    episode = Episode("t", 1, "sha256:t", "sha256:h", "mol", adapter="L2", outcome="error",
                      reason="engine", error="down")
    data = to_atif(episode, Trajectory(records), {"L2": "lora-2"})
    trajectory_model().model_validate(data)
    first, failed = data["steps"][1], data["steps"][2]
    assert first["model_name"] == "lora-2" and first["reasoning_content"] == "hmm"
    assert first["tool_calls"][0]["extra"] == {"arguments_text": "{not json"}
    assert first["observation"]["results"][0]["extra"]["is_error"] is True
    assert failed["extra"]["mol"]["error"]["message"] == "down" and "metrics" not in failed
    assert data["steps"][0]["extra"]["mol"]["events"][0]["route"] == "pinned"
