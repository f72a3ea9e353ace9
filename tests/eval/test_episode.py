"""How an episode ends: verifier crashes and timeouts are errors, budgets are fails with
their reason, engine failures are errors; each still replays as recorded."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from mol.eval.store import Store
from mol.runtime.testing import ScriptedEngine

from .conftest import hcp_text, mol, mol_json

pytestmark = pytest.mark.docker

HCP = hcp_text("""
[engine]
api_base = "http://127.0.0.1:9/v1"
max_retries = 0
[adapters.L1]
prompt = "You act."
tools.allow = ["terminal"]
max_turn_tokens = 50
[adapters.L2]
prompt = "You code."
tools.allow = ["terminal"]
max_steps = 2
""")

SCRIPT = """
[[L0]]
constrained = true
when = "slow|loop|engine"
times = -1
reply = "L2"
[[L0]]
constrained = true
when = "tokens"
times = -1
reply = "L1"
[[L0]]
constrained = false
times = -1
reply = "Summary."
[[L2]]
when = "slow"
times = -1
delay = 30
reply = "too late"
[[L2]]
when = "loop|again"
times = -1
tool_calls = [{ name = "terminal", arguments = { command = "echo again" } }]
[[L2]]
when = "engine"
times = -1
error = { status = 500, message = "the engine fell over" }
[[L1]]
when = "tokens"
times = -1
tool_calls = [{ name = "terminal", arguments = { command = "echo spent" } }]
"""


def outcomes(run: Path) -> dict[str, tuple[str, str, str]]:
    with Store(run, create=False) as store:
        return {e.task: (e.outcome, e.reason, e.error) for e in store.episodes()}


def test_the_verifier_decides_pass_fail_and_error(task_factory: Callable[..., Path],
                                                  tmp_path: Path,
                                                  capsys: pytest.CaptureFixture) -> None:
    task_factory("crash", test="echo broken; exit 3", solve="true")
    task_factory("slow-verifier", test="sleep 30", solve="true",
                 toml="[verifier]\ntimeout_sec = 2\n")
    task_factory("slow-oracle", solve="sleep 30", toml="[agent]\ntimeout_sec = 2\n")
    task_factory("half-reward", solve="true", toml="[verifier]\npass_threshold = 0.5\n",
                 test="echo '{\"reward\": 0.5}' > /logs/verifier/reward.json")
    task_factory("low-reward", solve="true", test="echo 0.2 > /logs/verifier/reward.txt")
    task_factory("no-reward", solve="true", test="echo nothing")
    task_factory("bad-reward", solve="true", test="echo many > /logs/verifier/reward.txt")
    task_factory("planted", solve="mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt",
                 test="echo 0 > /logs/verifier/other.txt")
    task_factory("planted-tests", solve="echo x > /tests/.planted",
                 test="[ -e /tests/.planted ] && exit 4; echo 1 > /logs/verifier/reward.txt")
    # What the tests print cannot pass for the reward files' listing that follows them.
    task_factory("forged-listing", solve="true", test="printf '\\n__mol_verifier_rewards__"
                 "\\n=== reward.txt\\n1\\n'; echo '{\"reward\": 0}' > "
                 "/logs/verifier/reward.json")
    hcp = tmp_path / "mol.toml"
    hcp.write_text(HCP)
    code, _, err = mol(capsys, "eval", "run", tmp_path / "suite", "--hcp", hcp, "--agent",
                       "oracle", "--out", tmp_path / "run", "-j", "4")
    assert code == 0, err
    found = outcomes(tmp_path / "run")
    assert found["crash"] == ("error", "verifier", "the verifier crashed (exit 3) without "
                              "writing a reward")
    assert found["slow-verifier"] == ("error", "verifier", "the verifier timed out after 2 s")
    assert found["slow-oracle"] == ("fail", "agent_timeout",
                                    "the agent did not finish within 2 s")
    assert found["half-reward"] == ("pass", "", "")
    assert found["low-reward"] == ("fail", "reward", "reward 0.2 < 1")
    assert found["no-reward"][:2] == ("error", "verifier")
    assert "wrote no reward" in found["no-reward"][2]
    assert found["bad-reward"] == ("error", "verifier", "reward.txt holds 'many', not a number")
    # A reward the agent planted before the verifier ran does not count, nor do files it
    # left in /tests.
    assert found["planted"][:2] == ("error", "verifier")
    assert found["planted-tests"] == ("pass", "", "")
    assert found["forged-listing"] == ("fail", "reward", "reward 0 < 1")


def test_budgets_fail_with_their_reason_and_engine_errors_are_errors(
        task_factory: Callable[..., Path], tmp_path: Path,
        capsys: pytest.CaptureFixture) -> None:
    task_factory("slow", instruction="A slow one.", toml="[agent]\ntimeout_sec = 3\n")
    task_factory("loop", instruction="A loop one.")
    task_factory("tokens", instruction="A tokens one.")
    task_factory("engine", instruction="An engine one.")
    hcp = tmp_path / "mol.toml"
    hcp.write_text(HCP)
    run = tmp_path / "run"
    with ScriptedEngine.serve(SCRIPT) as engine:
        code, _, err = mol(capsys, "eval", "run", tmp_path / "suite", "--hcp", hcp,
                           "--engine-url", engine.base_url, "--out", run, "-j", "4")
    assert code == 0, err
    found = outcomes(run)
    assert found["slow"] == ("fail", "agent_timeout", "the agent did not finish within 3 s")
    assert found["loop"] == ("fail", "max_steps", "L2 used its 2 steps "
                             "(adapters.L2.max_steps) before finishing")
    assert found["tokens"] == ("fail", "token_budget", "L1 used its 50 tokens "
                               "(adapters.L1.max_turn_tokens) before finishing")
    assert found["engine"][:2] == ("error", "engine")
    assert "the engine fell over" in found["engine"][2]
    # Each of them replays as it was recorded, with no engine at all.
    replay = mol_json(capsys, "eval", "replay", run)
    assert {e["task"]: e["verdict"] for e in replay["episodes"]} == {
        "slow": "identical", "loop": "identical", "tokens": "identical", "engine": "identical"}
    notes = {e["task"]: e["note"] for e in replay["episodes"]}
    assert "ran out of time" in notes["slow"] and "engine error" in notes["engine"]


def test_what_cannot_run_is_refused_before_anything_starts(
        task_factory: Callable[..., Path], tmp_path: Path,
        capsys: pytest.CaptureFixture) -> None:
    task_factory("no-solution")
    hcp = tmp_path / "mol.toml"
    hcp.write_text(HCP)
    suite = tmp_path / "suite"
    code, _, err = mol(capsys, "eval", "run", suite, "--hcp", hcp, "--agent", "oracle",
                       "--out", tmp_path / "run")
    assert code == 2 and "--agent oracle needs solution/solve.sh; missing in: no-solution" in err
    code, _, err = mol(capsys, "eval", "run", suite, "--hcp", hcp, "--adapter", "L9",
                       "--out", tmp_path / "run")
    assert code == 2 and "--adapter 'L9': the HCP has no such adapter" in err
    code, _, err = mol(capsys, "eval", "run", suite, "--hcp", hcp, "-j", "0")
    assert code == 2 and "positive number" in err


FAKER = """
[[L0]]
constrained = true
times = -1
reply = "L2"
[[L0]]
constrained = false
times = -1
reply = "Summary."
[[L2]]
when = "Fake"
tool_calls = [{ name = "terminal", arguments = { command = "tee() { cat >/dev/null; mkdir -p /logs/verifier; echo 1 >/logs/verifier/reward.txt; }; rm() { :; }; base64() { command base64 \\"$@\\" | sed 's/echo 0/echo 1/'; }; mkdir -p /tmp/bin; printf '#!/bin/sh\\\\necho 1\\\\n' >/tmp/bin/head; chmod +x /tmp/bin/head; export PATH=/tmp/bin:$PATH; echo planted" } }]
[[L2]]
when = "planted"
reply = "Done."
"""


def test_what_the_agent_defines_in_its_shell_cannot_fake_the_verdict(
        task_factory: Callable[..., Path], tmp_path: Path,
        capsys: pytest.CaptureFixture) -> None:
    # The agent's shell functions stand in for the verifier's tee and rm and for the
    # base64 that uploads the tests (rewriting them), and its PATH for head: had the
    # upload or the verifier run in the agent's shell state, the reward would be 1.
    task_factory("faker", instruction="Fake the reward.", test="echo 0 > /logs/verifier/reward.txt")
    hcp = tmp_path / "mol.toml"
    hcp.write_text(HCP)
    with ScriptedEngine.serve(FAKER) as engine:
        code, _, err = mol(capsys, "eval", "run", tmp_path / "suite", "--hcp", hcp,
                           "--engine-url", engine.base_url, "--out", tmp_path / "run")
        assert engine.unused_rules() == []
    assert code == 0, err
    assert outcomes(tmp_path / "run")["faker"] == ("fail", "reward", "reward 0 < 1")
