"""Pass rates, intervals, the sign test and ``mol eval show`` / ``compare`` on real stores."""

from __future__ import annotations

from pathlib import Path

import pytest

from mol.eval.stats import sign_test, wilson
from mol.eval.store import Episode, Store

from .conftest import mol, mol_json


def test_wilson_interval_matches_hand_computed_values() -> None:
    assert wilson(10, 10) == pytest.approx((0.72246, 1.0), abs=1e-4)
    assert wilson(10, 21) == pytest.approx((0.28343, 0.67631), abs=1e-4)
    assert wilson(0, 5) == pytest.approx((0.0, 0.43449), abs=1e-4)
    assert wilson(0, 0) == (0.0, 1.0)


@pytest.mark.parametrize(("improved", "regressed", "p"), [
    (6, 0, 0.03125), (0, 6, 0.03125), (5, 1, 0.21875), (4, 1, 0.375), (3, 3, 1.0), (0, 0, 1.0),
    (10, 0, 2 / 1024),
])
def test_exact_sign_test(improved: int, regressed: int, p: float) -> None:
    assert sign_test(improved, regressed) == pytest.approx(p)


def fill(folder: Path, passes: dict[str, list[str]], digest: str = "sha256:" + "a" * 64) -> Path:
    """A run folder whose store holds these outcomes (task -> outcome per epoch)."""
    with Store(folder) as store:
        store.claim({"hcp_digest": digest, "agent": "mol", "adapter": ""}, {"hcp_name": "t"})
        for task, outcomes in passes.items():
            for epoch, outcome in enumerate(outcomes, start=1):
                store.put(Episode(task, epoch, "sha256:task", digest, "mol", outcome=outcome,
                                  reward={"pass": 1.0, "fail": 0.0}.get(outcome),
                                  steps=2, prompt_tokens=100, completion_tokens=10,
                                  cached_tokens=50, wall_sec=1.5))
    return folder


P, F, E = "pass", "fail", "error"
RUN_A = {"t1": [P, F, F], "t2": [F, F, F], "t3": [P, P, P], "t4": [P, P, F], "t5": [F, F, F],
         "t6": [P, F, F], "t7": [P, P, P]}
RUN_B = {"t1": [P, P, P], "t2": [P, E, P], "t3": [P, P, P], "t4": [P, P, P], "t5": [F, P, E],
         "t6": [F, F, F], "t7": [P, P, P], "t8": [P, F, F]}


def test_compare_gives_the_paired_table_and_the_sign_test(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture) -> None:
    a, b = fill(tmp_path / "a", RUN_A), fill(tmp_path / "b", RUN_B)
    data = mol_json(capsys, "eval", "compare", a, b)
    found = data["compare"]
    assert {row["task"]: row["change"] for row in found["tasks"]} == {
        "t1": "improved", "t2": "improved", "t3": "unchanged", "t4": "improved",
        "t5": "improved", "t6": "regressed", "t7": "unchanged"}
    assert (found["improved"], found["regressed"], found["unchanged"]) == (4, 1, 2)
    # n = 5 tasks changed, k = 1 regressed: p = 2 * (C(5,0) + C(5,1)) / 2^5 = 0.375
    assert found["sign_test_p"] == pytest.approx(0.375)
    assert found["only_a"] == [] and found["only_b"] == ["t8"]
    row = next(r for r in found["tasks"] if r["task"] == "t2")
    assert row["a"] == {"passed": 0, "episodes": 3} and row["b"] == {"passed": 2, "episodes": 3}
    assert data["a"]["passed"] == 10 and data["a"]["episodes"] == 21
    assert data["a"]["ci95"] == pytest.approx([0.28343, 0.67631], abs=1e-4)
    assert data["b"]["errors"] == 2 and data["b"]["pass_rate"] == pytest.approx(16 / 24)
    code, out, _ = mol(capsys, "eval", "compare", a, b)
    assert code == 0
    assert "4 improved, 1 regressed, 2 unchanged; sign test p = 0.375" in out
    assert "only in B: t8" in out


def test_show_reports_tasks_rate_and_cost(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run = fill(tmp_path / "a", RUN_A)
    data = mol_json(capsys, "eval", "show", run)
    assert data["meta"]["hcp_digest"] == "sha256:" + "a" * 64
    t4 = next(row for row in data["tasks"] if row["task"] == "t4")
    assert t4 == {"task": "t4", "episodes": 3, "passed": 2, "failed": 1, "errors": 0,
                  "mean_reward": pytest.approx(2 / 3, abs=1e-6), "placement": ["local"]}
    assert data["cost"]["prompt_tokens"] == 2100 and data["cost"]["per_episode"]["steps"] == 2
    code, out, _ = mol(capsys, "eval", "show", run)
    assert code == 0 and "pass rate 47.6% (10/21), 95% CI [28.3%, 67.6%]; 0 errors" in out


def test_show_of_a_folder_that_is_no_run_says_so(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture) -> None:
    code, _, err = mol(capsys, "eval", "show", tmp_path)
    assert code == 1 and "not an eval run (no results.db" in err
