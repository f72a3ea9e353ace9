"""diff and RFC 6902 patch, through the library and the CLI."""

import json
from pathlib import Path

import pytest

from mol.cli.main import main
from mol.core.errors import HCPError
from mol.hcp.changes import apply_patch, diff
from mol.hcp.loader import load


def test_diff_lists_key_paths_and_changed_files(venti, tmp_path):
    other = venti.with_name("other.toml")
    other.write_text(venti.read_text().replace("temperature = 0.2", "temperature = 0.3"))
    (venti.parent / "prompts" / "route2.md").write_text("Route it.\nmodel_id=\n")
    other.write_text(other.read_text().replace("prompts/route.md", "prompts/route2.md"))
    changes = {c.path: c for c in diff(load(venti), load(other))}
    assert set(changes) == {"adapters.L2.params.temperature", "router.prompt.path"}
    assert str(changes["adapters.L2.params.temperature"]).endswith("0.2 -> 0.3")
    assert changes["router.prompt.path"].file == "prompts/route2.md"


def test_diff_of_equal_meaning_is_empty(venti, capsys):
    assert main(["hcp", "diff", str(venti), str(venti)]) == 0
    assert "no differences in meaning (same digest)" in capsys.readouterr().out


def test_patch_yields_a_validated_child(venti, tmp_path, capsys):
    parent = load(venti)
    patch = tmp_path / "p.json"
    patch.write_text(json.dumps([
        {"op": "replace", "path": "/adapters/L2/max_steps", "value": 10},
        {"op": "add", "path": "/adapters/L2/tools/deny/-", "value": "write_file"},
    ]))
    out = venti.parent / "child.toml"
    assert main(["hcp", "patch", str(venti), str(patch), "-o", str(out)]) == 0
    child = load(out)
    assert child.doc.parent == parent.digest
    assert child.doc.adapters["L2"].max_steps == 10
    assert child.doc.adapters["L2"].tools.deny == ["write_file"]
    assert [c.path for c in diff(parent, child)] == [
        "adapters.L2.max_steps", "adapters.L2.tools.deny", "parent"]


def test_patch_output_elsewhere_rewrites_file_references(venti, tmp_path, capsys):
    patch = tmp_path / "p.json"
    patch.write_text('[{"op": "replace", "path": "/name", "value": "venti-2"}]')
    out_dir = tmp_path / "elsewhere" / "deeper"
    out_dir.mkdir(parents=True)
    assert main(["hcp", "patch", str(venti), str(patch), "-o", str(out_dir / "v2.toml")]) == 0
    child = load(out_dir / "v2.toml")
    assert child.name == "venti-2"
    # The same files, now named relative to the new location.
    assert sorted(child.files.values()) == sorted(load(venti).files.values())
    assert all(ref.startswith("../../examples/") for ref in child.files)


def test_patch_that_breaks_validation_is_refused(venti):
    with pytest.raises(HCPError) as info:
        apply_patch(load(venti), [{"op": "replace", "path": "/adapters/L2/max_steps",
                                   "value": "lots"}])
    assert "adapters.L2.max_steps" in str(info.value)


@pytest.mark.parametrize("ops, expected", [
    ({"op": "add"}, "must be a JSON array"),
    ([{"op": "remove", "path": "/nope/deeper"}], "patch operation 0 (remove /nope/deeper)"),
    ([{"op": "test", "path": "/name", "value": "other"}], "patch operation 0 (test /name)"),
    (["not an object"], "patch operation 0: needs an object"),
])
def test_bad_patches_name_the_operation(venti, ops, expected):
    with pytest.raises(HCPError) as info:
        apply_patch(load(venti), ops)
    assert expected in str(info.value)


def test_patch_cli_rejects_bad_json(venti, tmp_path, capsys):
    patch = tmp_path / "p.json"
    patch.write_text("[{")
    assert main(["hcp", "patch", str(venti), str(patch)]) == 2
    assert "not valid JSON" in capsys.readouterr().err



def test_diff_names_a_changed_skill(venti):
    import shutil

    skills = venti.parent / "myskills"
    root = Path(__file__).resolve().parents[2] / "skills"
    for name in ("swe-workflow", "terminal-basics", "personal-agent", "ui4a-genui"):
        shutil.copytree(root / name, skills / name)
    venti.write_text(venti.read_text() + '\n[skills]\npaths = ["myskills"]\nbuiltin = false\n')
    before = load(venti)
    body = skills / "swe-workflow" / "SKILL.md"
    body.write_text(body.read_text() + "\nOne more habit.\n")
    after = load(venti)
    assert after.digest != before.digest
    changes = {c.path: str(c) for c in diff(before, after)}
    assert changes == {"skills.swe-workflow": "~ skills.swe-workflow: file skill swe-workflow changed",
                       "skills.paths[0]": "~ skills.paths[0]: file myskills changed"}
