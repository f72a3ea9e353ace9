"""``mol eval affected`` against its oracle: every task outside the slice gets exactly its
parent's outcome when the whole suite is run again under the edited HCP."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mol.cli.main import main
from mol.eval.evolve.document import document
from mol.eval.evolve.materialize import materialize
from mol.eval.store import Store
from mol.hcp.changes import patch_document
from mol.hcp.loader import load
from mol.runtime.testing import ScriptedEngine

from .conftest import HCP, PARENT_OUTCOMES, PATCHES, SUITE, mol, mol_json

pytestmark = pytest.mark.docker

TIERS = {  # patch: (unaffected by reads, by replay, affected)
    "newline": (7, 0, 6),        # a prompt edit some tasks use (L2's)
    "deny-terminal": (6, 0, 7),  # a tool-policy edit (L1's)
    "skill-body": (7, 5, 1),     # a skill edit: L2's other tasks list it, one loads it
    "unused-adapter": (13, 0, 0),  # an edit to an adapter no task uses
}


def outcomes(run: Path) -> dict[str, str]:
    with Store(run, create=False) as store:
        return {e.task: e.outcome for e in store.episodes()}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(TIERS))
def test_tasks_outside_the_slice_keep_their_outcome_on_a_full_rerun(
        name: str, parent_run: Path, engine: ScriptedEngine, tmp_path: Path,
        capsys: pytest.CaptureFixture) -> None:
    patch = PATCHES / f"{name}.json"
    found = mol_json(capsys, "eval", "affected", "--run", parent_run, "--patch", patch)
    assert (found["unaffected_by_reads"], found["unaffected_by_replay"],
            found["affected"]) == TIERS[name], found
    unaffected = {t["task"] for t in found["tasks"] if not t["affected"]}

    parent = load(HCP)
    edited = materialize(parent, patch_document(document(parent),
                                                json.loads(patch.read_text())),
                         tmp_path / "hcp")
    rerun = tmp_path / "rerun"
    assert main(["eval", "run", str(SUITE), "--hcp", str(edited.path), "--engine-url",
                 engine.base_url, "--out", str(rerun), "-j", "4"]) == 0
    before, after = outcomes(parent_run), outcomes(rerun)
    assert len(after) == 13
    assert {task: after[task] for task in unaffected} == \
        {task: before[task] for task in unaffected}
    if name == "newline":  # the slice is not empty for nothing: the edit changes its tasks
        changed = {task for task in after if after[task] != before[task]}
        assert changed == {f"line-{t}" for t in ("answer", "csv-header", "greeting", "motd",
                                                 "version")}


def test_the_parent_run_has_the_scripted_outcomes(parent_run: Path) -> None:
    got = outcomes(parent_run)
    assert {t: o for t, o in got.items() if o == "pass"} == PARENT_OUTCOMES
    assert len(got) == 13


def test_affected_prints_each_tier_and_names_bad_patches(
        parent_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    code, out, _ = mol(capsys, "eval", "affected", "--run", parent_run, "--patch",
                       PATCHES / "skill-body.json")
    assert code == 0
    assert "13 tasks: 7 unaffected by their reads, 5 by replay, 1 affected" in out
    assert "release-notes    affected    tier 3: replay diverges" in out
    bad = tmp_path / "bad.json"
    bad.write_text('[{"op": "replace", "path": "/adapters/L9/prompt", "value": "x"}]')
    code, _, err = mol(capsys, "eval", "affected", "--run", parent_run, "--patch", bad)
    assert code == 2 and "patch operation 0" in err and "/adapters/L9/prompt" in err
    bad.write_text("[{")
    code, _, err = mol(capsys, "eval", "affected", "--run", parent_run, "--patch", bad)
    assert code == 2 and "not valid JSON" in err
