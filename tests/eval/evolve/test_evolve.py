"""``mol evolve`` end to end on the example suite and the scripted engine: proposals, the
gate's three outcomes, promotion, the lineage over two rounds, an adapter as proposer."""

from __future__ import annotations

import itertools
import json
import shutil
import tomllib
from pathlib import Path

import pytest

from mol.cli.main import main
from mol.eval.store import Store
from mol.hcp.loader import load
from mol.runtime.testing import ScriptedEngine

from .conftest import HCP, PATCHES, SUITE, mol, mol_json

pytestmark = pytest.mark.docker


def propose(capsys: pytest.CaptureFixture, lab: Path, run: Path, proposer: str,
            *more: str) -> dict:
    return mol_json(capsys, "evolve", "propose", "--run", run, "--hcp", HCP, "--proposer",
                    proposer, "--lab", lab, *more)


def evaluate(capsys: pytest.CaptureFixture, lab: Path, run: Path, candidate: str,
             engine: ScriptedEngine) -> tuple[int, str]:
    code, out, err = mol(capsys, "evolve", "evaluate", "--run", run, "--candidate", candidate,
                         "--lab", lab, "--engine-url", engine.base_url, "-j", "4")
    assert code == 0, err
    return code, out


def test_the_gate_promotes_rejects_a_guard_and_is_inconclusive_on_two_wins_one_loss(
        parent_run: Path, engine: ScriptedEngine, tmp_path: Path,
        capsys: pytest.CaptureFixture) -> None:
    lab = tmp_path / "lab"
    ids = {name: propose(capsys, lab, parent_run, f"file:{PATCHES / name}.json")
           ["candidates"][0]["id"] for name in ("newline", "deny-terminal", "short")}

    _, out = evaluate(capsys, lab, parent_run, ids["newline"], engine)
    assert "slice: 6 of 13 tasks affected (7 unaffected by their reads, 0 by replay)" in out
    assert "episodes run: 6 under the candidate, 0 more of the parent; a full " \
           "re-evaluation runs 13 (7 inherited)" in out
    assert "gate: promote: 5 wins, 0 losses: sign test p = 0.0312 <= 0.05" in out

    _, out = evaluate(capsys, lab, parent_run, ids["deny-terminal"], engine)
    assert "gate: reject: guard regressed: guard-logs (1/1 -> 0/1)" in out
    assert "episodes run: 7 under the candidate" in out

    _, out = evaluate(capsys, lab, parent_run, ids["short"], engine)
    assert "gate: inconclusive: 2 wins, 1 losses: sign test p = 0.5 > 0.05" in out
    assert "needs: more epochs" in out

    # the candidate's run holds every task: the affected ones run, the others inherited
    evaluation = json.loads((lab / "candidates" / ids["newline"] / "evaluations.json")
                            .read_text())[-1]
    with Store(Path(evaluation["candidate_run"]), create=False) as store:
        rows = {e.task: e for e in store.episodes()}
    assert len(rows) == 13
    assert {t for t, e in rows.items() if e.inherited} == {
        t["task"] for t in evaluation["slice"]["tasks"] if not t["affected"]}
    assert all(e.outcome == "pass" for t, e in rows.items() if t.startswith("line-"))

    # evaluated again: nothing runs
    _, out = evaluate(capsys, lab, parent_run, ids["newline"], engine)
    assert "(selection, evaluated before)" in out

    code, _, err = mol(capsys, "evolve", "promote", ids["deny-terminal"], "--lab", lab)
    assert code == 1 and "guard regressed: guard-logs" in err
    promoted = mol_json(capsys, "evolve", "promote", ids["newline"], "--lab", lab,
                        "--to", tmp_path / "v2")
    artifact = load(Path(promoted["hcp"]))
    assert artifact.doc.parent == load(HCP).digest == promoted["parent"]
    assert artifact.digest == promoted["digest"]
    assert "newline" in artifact.prompt_text(artifact.doc.adapter("L2").prompt)
    assert sorted(p.name for p in (tmp_path / "v2").rglob("*") if p.is_file()) == \
        ["hcp.toml", "l2.md"]  # the changed prompt file only; the rest stays referenced


def test_a_patch_outside_the_evolvable_paths_is_refused_with_the_path(
        parent_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    code, _, err = mol(capsys, "evolve", "propose", "--run", parent_run, "--hcp", HCP,
                       "--proposer", f"file:{PATCHES / 'engine.json'}", "--lab", tmp_path)
    assert code == 2
    assert "refused: /engine/timeout_sec is never evolvable (/engine)" in err
    params = tmp_path / "params.json"
    params.write_text('[{"op": "add", "path": "/adapters/L1/params/temperature", '
                      '"value": 0.1}]')
    code, _, err = mol(capsys, "evolve", "propose", "--run", parent_run, "--hcp", HCP,
                       "--proposer", f"file:{params}", "--lab", tmp_path)
    assert code == 2 and "/adapters/L1/params/temperature is not under [evolve] paths" in err
    code, _, err = mol(capsys, "evolve", "propose", "--run", parent_run, "--hcp",
                       PATCHES.parent / "terminal-hcp.toml", "--proposer",
                       f"file:{params}", "--lab", tmp_path)
    assert code == 2 and "is a run of another HCP" in err


def test_evolve_run_over_two_rounds_makes_a_lineage_of_three_digests(
        parent_run: Path, engine: ScriptedEngine, tmp_path: Path,
        capsys: pytest.CaptureFixture) -> None:
    edits = tmp_path / "edits.json"
    edits.write_text(json.dumps([
        {"note": "final newlines", "patch": json.loads((PATCHES / "newline.json").read_text())},
        {"note": "executable scripts",
         "patch": json.loads((PATCHES / "executable.json").read_text())}]))
    lab = tmp_path / "lab"
    result = mol_json(capsys, "evolve", "run", "--run", parent_run, "--hcp", HCP,
                      "--proposer", f"file:{edits}", "--rounds", "2", "--lab", lab,
                      "--engine-url", engine.base_url, "-j", "4", "--to", tmp_path / "out")
    lineage = result["lineage"]
    assert len(lineage) == len(set(lineage)) == 3
    assert lineage[0] == load(HCP).digest
    assert [r["promoted"] is not None for r in result["rounds"]] == [True, True]
    assert result["spent"]["episodes"] == 6 + 7  # the slices only, not 2 x 13
    for parent, child in itertools.pairwise(lineage):
        [toml] = [p for p in (tmp_path / "out").glob("*/hcp.toml") if load(p).digest == child]
        assert tomllib.loads(toml.read_text())["parent"] == parent
        assert load(toml).doc.parent == parent
    final = load(next(p for p in (tmp_path / "out").glob("2-*/hcp.toml")))
    assert "executable" in final.prompt_text(final.doc.adapter("L1").prompt)
    assert "newline" in final.prompt_text(final.doc.adapter("L2").prompt)

    tree = mol_json(capsys, "evolve", "log", "--lab", lab)
    [root] = tree["roots"]
    assert root["digest"] == lineage[0]
    [first] = root["children"]
    [second] = first["children"]
    assert (first["digest"], second["digest"]) == (lineage[1], lineage[2])
    assert first["evaluations"][-1]["outcome"] == second["evaluations"][-1]["outcome"] == \
        "promote"
    assert second["evaluations"][-1]["slice"]["affected"] == 7
    assert first["promoted"]["digest"] == lineage[1]
    code, out, _ = mol(capsys, "evolve", "log", "--lab", lab)
    assert code == 0 and out.count("promoted sha256:") == 2

    # a third round: nothing left to propose, so the loop stops at once
    again = mol_json(capsys, "evolve", "run", "--run", parent_run, "--hcp", HCP,
                     "--proposer", f"file:{edits}", "--rounds", "1", "--lab", lab,
                     "--budget-episodes", "0", "--engine-url", engine.base_url)
    assert again["lineage"] == lineage[:1] and "budget of 0 episodes" in again["stopped"]


def test_an_adapter_proposes_and_its_valid_candidate_is_evaluated(
        parent_run: Path, engine: ScriptedEngine, tmp_path: Path,
        capsys: pytest.CaptureFixture) -> None:
    lab = tmp_path / "lab"
    found = propose(capsys, lab, parent_run, "adapter:L3", "-n", "4", "--engine-url",
                    engine.base_url)
    [candidate] = found["candidates"]
    assert candidate["touched"] == ["/adapters/L2/prompt"]
    assert candidate["proposer"] == "adapter:L3"
    reasons = [d["reason"] for d in found["dropped"]]
    assert len(reasons) == 3, reasons
    assert "refused: /sandbox/memory is never evolvable (/sandbox)" in reasons[0]
    assert "patch operation 0 (replace /adapters/L9/prompt)" in reasons[1]
    assert "adds the hook command" in reasons[2]
    asked = [r for r in engine.requests if r.get("adapter") == "L3"][-1]["body"]["messages"]
    assert "## line-greeting (fail" in asked[1]["content"]  # the failed episodes, trimmed
    assert "/adapters/L2/prompt" in asked[1]["content"]  # the evolvable parts

    _, out = evaluate(capsys, lab, parent_run, candidate["id"], engine)
    assert "gate: promote: 5 wins, 0 losses" in out


def test_the_best_of_several_needs_a_confirmation_on_other_tasks(
        parent_run: Path, engine: ScriptedEngine, tmp_path: Path,
        capsys: pytest.CaptureFixture) -> None:
    lab = tmp_path / "lab"
    batch = tmp_path / "batch.json"
    batch.write_text(json.dumps([json.loads((PATCHES / f"{name}.json").read_text())
                                 for name in ("newline", "short")]))
    found = propose(capsys, lab, parent_run, f"file:{batch}")
    best, other = (c["id"] for c in found["candidates"])
    for candidate in (best, other):
        evaluate(capsys, lab, parent_run, candidate, engine)
    code, _, err = mol(capsys, "evolve", "promote", best, "--lab", lab)
    assert code == 1 and "needs a confirmation run on tasks not used to select it" in err

    held_out = tmp_path / "held-out"  # tasks like the line-* ones, not used to select it
    for task in ("answer", "csv-header", "greeting", "motd", "version"):
        shutil.copytree(SUITE / f"line-{task}", held_out / f"held-{task}")
        with (held_out / f"held-{task}" / "instruction.md").open("a") as instruction:
            instruction.write("This is a held-out task.\n")
    shutil.copytree(SUITE / "make-dirs", held_out / "make-dirs")  # used to select: overlaps
    confirm = tmp_path / "confirm-run"
    assert main(["eval", "run", str(held_out), "--hcp", str(HCP), "--engine-url",
                 engine.base_url, "--out", str(confirm), "-j", "4", "--tasks", "held-*"]) == 0
    overlapping = tmp_path / "overlapping-run"
    assert main(["eval", "run", str(held_out), "--hcp", str(HCP), "--engine-url",
                 engine.base_url, "--out", str(overlapping), "--tasks", "make-dirs"]) == 0
    _, out = evaluate(capsys, lab, overlapping, best, engine)
    assert "(overlapping)" in out
    code, _, err = mol(capsys, "evolve", "promote", best, "--lab", lab)
    assert code == 1 and "needs a confirmation run" in err
    _, out = evaluate(capsys, lab, confirm, best, engine)
    assert "(confirmation)" in out and "gate: promote: 5 wins" in out
    evaluations = json.loads((lab / "candidates" / best / "evaluations.json").read_text())
    assert [e["role"] for e in evaluations] == ["selection", "overlapping", "confirmation"]
    promoted = mol_json(capsys, "evolve", "promote", best, "--lab", lab)
    assert load(Path(promoted["hcp"])).doc.parent == load(HCP).digest


def test_more_epochs_run_the_parents_missing_ones_and_an_untouched_slice_runs_nothing(
        parent_run: Path, engine: ScriptedEngine, tmp_path: Path,
        capsys: pytest.CaptureFixture) -> None:
    run = tmp_path / "parent"
    shutil.copytree(parent_run, run)  # this test adds epochs to it
    lab = tmp_path / "lab"
    skill = propose(capsys, lab, run, f"file:{PATCHES / 'skill-body.json'}")
    code, out, err = mol(capsys, "evolve", "evaluate", "--run", run, "--candidate",
                         skill["candidates"][0]["id"], "--lab", lab, "--epochs", "2",
                         "--engine-url", engine.base_url)
    assert code == 0, err
    assert "slice: 1 of 13 tasks affected (7 unaffected by their reads, 5 by replay)" in out
    assert "episodes run: 2 under the candidate, 1 more of the parent; a full " \
           "re-evaluation runs 26" in out
    with Store(run, create=False) as store:
        assert sorted(e.epoch for e in store.episodes() if e.task == "release-notes") == [1, 2]
    assert "gate: reject: no improvement: 0 wins, 0 losses" in out

    unused = propose(capsys, lab, run, f"file:{PATCHES / 'unused-adapter.json'}")
    _, out = evaluate(capsys, lab, run, unused["candidates"][0]["id"], engine)
    assert "episodes run: 0 under the candidate, 0 more of the parent" in out
    assert "gate: inconclusive: the edit changes no episode of this suite" in out


def test_evolve_run_stops_when_a_round_promotes_nothing(
        parent_run: Path, engine: ScriptedEngine, tmp_path: Path,
        capsys: pytest.CaptureFixture) -> None:
    result = mol_json(capsys, "evolve", "run", "--run", parent_run, "--hcp", HCP,
                      "--proposer", f"file:{PATCHES / 'deny-terminal.json'}", "--rounds", "3",
                      "--lab", tmp_path / "lab", "--engine-url", engine.base_url, "-j", "4")
    assert result["stopped"] == "round 1: nothing promoted"
    assert len(result["rounds"]) == 1 and result["lineage"] == [load(HCP).digest]
    [tried] = result["rounds"][0]["candidates"]
    assert tried["outcome"] == "reject" and "guard-logs" in tried["reason"]


def test_evolve_run_with_an_adapter_proposer_stops_when_it_has_nothing_more(
        parent_run: Path, engine: ScriptedEngine, tmp_path: Path,
        capsys: pytest.CaptureFixture) -> None:
    result = mol_json(capsys, "evolve", "run", "--run", parent_run, "--hcp", HCP,
                      "--proposer", "adapter:L3", "--rounds", "3", "--lab", tmp_path / "lab",
                      "--engine-url", engine.base_url, "-j", "4")
    first, second = result["rounds"]
    assert first["promoted"] is not None and len(first["dropped"]) == 3
    # line-greeting passes under the promoted HCP, so L3 (scripted) has no edit left to offer
    assert second["candidates"] == [] and result["stopped"] == "round 2: no valid candidate"
    assert "the reply holds no JSON array" in second["dropped"][0]["reason"]
    assert len(result["lineage"]) == 2
