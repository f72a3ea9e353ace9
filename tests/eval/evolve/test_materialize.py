"""The evolve document of an artifact and a patched one written back as an artifact folder:
prompt files, inline prompts and skills, each only where it changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from mol.core.errors import EvalError
from mol.eval.evolve.document import document, touched
from mol.eval.evolve.materialize import materialize
from mol.hcp.changes import patch_document
from mol.hcp.loader import load

from .conftest import hcp_text


def skill(root: Path, name: str, body: str = "Do it well.") -> None:
    (root / name).mkdir(parents=True)
    (root / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: The {name} "
                                          f"skill.\n---\n\n{body}\n")


@pytest.fixture
def parent(tmp_path: Path):
    base = tmp_path / "base"
    skill(base / "skills", "alpha")
    skill(base / "skills", "beta")
    (base / "prompts").mkdir()
    (base / "prompts" / "l1.md").write_text("You do chores.")
    (base / "mol.toml").write_text(hcp_text(
        '[adapters.L1]\nprompt = { path = "prompts/l1.md" }\nskills = ["alpha", "beta"]\n'
        '[adapters.L2]\nprompt = "You write."\n[skills]\npaths = ["skills"]\nbuiltin = false\n'))
    return load(base / "mol.toml")


def test_the_document_has_prompts_and_skill_files_inline(parent) -> None:
    doc = document(parent)
    assert doc["adapters"]["L1"]["prompt"] == "You do chores."
    assert doc["adapters"]["L1"]["tools"]["deny"] == []  # defaults filled in
    assert sorted(doc["$skills"]) == ["alpha", "beta"]
    assert "Do it well." in doc["$skills"]["alpha"]["SKILL.md"]


def test_a_patch_is_written_where_it_changed_and_reloads_as_asked(parent, tmp_path) -> None:
    before = document(parent)
    after = patch_document(before, [
        {"op": "replace", "path": "/adapters/L1/prompt", "value": "You do chores carefully."},
        {"op": "replace", "path": "/adapters/L2/prompt", "value": "You write briefly."},
        {"op": "add", "path": "/$skills/alpha/NOTES.md", "value": "More notes.\n"},
        {"op": "add", "path": "/adapters/L2/tools/deny/-", "value": "terminal"}])
    assert touched(before, after) == ["/$skills/alpha/NOTES.md", "/adapters/L1/prompt",
                                      "/adapters/L2/prompt", "/adapters/L2/tools/deny"]
    out = tmp_path / "child"
    child = materialize(parent, after, out)
    assert child.doc.parent == parent.digest
    assert document(child)["adapters"] == after["adapters"]
    assert document(child)["$skills"] == after["$skills"]
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert written == ["hcp.toml", "prompts/l1.md", "skills/alpha/NOTES.md",
                       "skills/alpha/SKILL.md"]  # beta and the rest stay where they are
    assert child.doc.adapter("L2").prompt == "You write briefly."  # inline stays inline
    assert (parent.base_dir / "prompts" / "l1.md").read_text() == "You do chores."
    assert load(out / "hcp.toml").digest == child.digest
    with pytest.raises(EvalError, match="not empty"):
        materialize(parent, after, out)
