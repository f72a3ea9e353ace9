"""``mol evolve`` with adapters: a candidate that adds a fifth adapter (its route label, its
description, the router prompt offering it) is an ordinary candidate; the slice counts every
routed task as affected (routing may change), and the gate decides on them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mol.hcp.loader import load
from mol.runtime.testing import ScriptedEngine

from .conftest import HCP, PATCHES, mol_json

pytestmark = pytest.mark.docker

FIFTH = [
    {"op": "add", "path": "/adapters/L4", "value": {
        "description": "Writes one-line text files.",
        "prompt": "You are the line specialist. You write one-line text files.",
        "tools": {"allow": ["write_file", "read_file"]}, "max_steps": 6}},
    {"op": "add", "path": "/router/labels/-", "value": "L4"},
    {"op": "replace", "path": "/router/prompt", "value":
        "Route the turn: L4 for one-line text files, L1 for shell chores, L2 for writing "
        "files and notes, L3 for documentation questions, L0 for conversation."},
]
"""The edit that adds L4 (evolve-script.toml routes the line-* tasks to it once the router
prompt offers it, and L4 writes them with a final newline)."""


def _evolvable_hcp(folder: Path) -> Path:
    """evolve-hcp.toml with ``[evolve] paths`` opened to a new adapter and the router (its
    behaviour digest is the same: the parent run is a run of it)."""
    text = HCP.read_text()
    for ref in ("evolve-prompts/", "evolve-skills"):
        text = text.replace(f'"{ref}', f'"{HCP.parent}/{ref}')
    text += ('\n[evolve]\npaths = ["/adapters/$keys", "/adapters/*/description", '
             '"/adapters/*/prompt", "/adapters/*/tools", "/adapters/*/max_steps", '
             '"/adapters/*/lora", "/router/labels", "/router/prompt"]\n')
    path = folder / "hcp.toml"
    path.write_text(text)
    assert load(path).behaviour_digest == load(HCP).behaviour_digest
    return path


def test_a_fifth_adapter_is_a_candidate_the_gate_decides_on_every_routed_task(
        parent_run: Path, engine: ScriptedEngine, tmp_path: Path,
        capsys: pytest.CaptureFixture) -> None:
    hcp = _evolvable_hcp(tmp_path)
    edits = tmp_path / "edits.json"
    edits.write_text(json.dumps([
        {"note": "a line specialist", "patch": FIFTH},
        {"note": "executable scripts",
         "patch": json.loads((PATCHES / "executable.json").read_text())}]))
    lab = tmp_path / "lab"
    result = mol_json(capsys, "evolve", "run", "--run", parent_run, "--hcp", hcp,
                      "--proposer", f"file:{edits}", "--rounds", "2", "--lab", lab,
                      "--engine-url", engine.base_url, "-j", "4", "--to", tmp_path / "out")
    first, second = result["rounds"]
    assert first["promoted"] is not None and second["promoted"] is not None, result
    assert len(set(result["lineage"])) == 3
    # Round 1: a new label may change any routing, so every routed task is affected (all
    # 13: none is unaffected by its reads or by replay); the five line-* tasks now pass.
    tree = mol_json(capsys, "evolve", "log", "--lab", lab)
    [root] = tree["roots"]
    [added] = root["children"]
    evaluation = added["evaluations"][-1]
    assert evaluation["slice"]["affected"] == 13 and evaluation["outcome"] == "promote"
    assert "5 wins, 0 losses" in evaluation["reason"]
    # Round 2 (from the five-adapter parent): only L1's tasks are affected.
    [executable] = added["children"]
    assert executable["evaluations"][-1]["slice"]["affected"] == 7
    assert result["spent"]["episodes"] == 13 + 7
    final = load(next((tmp_path / "out").glob("2-*/hcp.toml")))
    assert sorted(final.doc.adapters) == ["L0", "L1", "L2", "L3", "L4"]
    assert final.doc.route_labels == ["L0", "L1", "L2", "L3", "L4"]
    assert final.doc.adapters["L4"].description == "Writes one-line text files."


def test_a_new_lora_version_affects_the_tasks_that_reach_its_adapter(
        parent_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    # Replay cannot check weights: every episode with a request on L2 is affected (the five
    # line-* tasks and release-notes), and no other; a new label affects every routed task.
    lora = tmp_path / "l2-v2.gguf"
    lora.write_bytes(b"L2, second version")
    patch = tmp_path / "lora.json"
    patch.write_text(json.dumps([{"op": "add", "path": "/adapters/L2/lora",
                                  "value": {"path": str(lora)}}]))
    found = mol_json(capsys, "eval", "affected", "--run", parent_run, "--patch", patch,
                     "--json")
    assert sorted(t["task"] for t in found["tasks"] if t["affected"]) == sorted(
        [f"line-{n}" for n in ("answer", "csv-header", "greeting", "motd", "version")]
        + ["release-notes"])
    assert all("/adapters/L2/lora" in t["reason"] for t in found["tasks"] if t["affected"])
    patch.write_text(json.dumps(FIFTH))
    found = mol_json(capsys, "eval", "affected", "--run", parent_run, "--patch", patch,
                     "--json")
    assert found["affected"] == 13
