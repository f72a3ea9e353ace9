"""Skills in an HCP artifact: names checked at load, content in the digest, the catalog."""

from __future__ import annotations

import shutil

import pytest

from mol.core.errors import HCPError
from mol.hcp import loader as hcp_loader
from mol.hcp.digest import digest_value
from mol.hcp.loader import load
from mol.plugins.catalog import CATALOG_HEADER, catalog_text, with_catalog
from mol.skills import loader as skill_loader


def _error(path) -> str:
    with pytest.raises(HCPError) as caught:
        load(path)
    return str(caught.value)


def test_unknown_adapter_skill_is_a_load_error_with_a_suggestion(tmp_path, make_artifact):
    message = _error(make_artifact(tmp_path, {"L2": ["swe-workflw"]}))
    assert ("a.toml:9: adapters.L2.skills[0]: names skill 'swe-workflw', which no skill "
            "source provides (did you mean 'swe-workflow'?)") in message


def test_unknown_skill_without_close_match_lists_the_available(tmp_path, make_artifact):
    message = _error(make_artifact(tmp_path, {"L1": ["personal-agent", "zzz"]}))
    assert "adapters.L1.skills[1]: names skill 'zzz'" in message
    assert "(available skills: personal-agent, swe-workflow, terminal-basics, ui4a-genui)" in message


def test_builtin_false_hides_the_builtin_skills(tmp_path, make_artifact):
    message = _error(make_artifact(tmp_path, {"L2": ["swe-workflow"]}, builtin=False))
    assert "adapters.L2.skills[0]: names skill 'swe-workflow'" in message
    assert "skills.builtin is false and skills.paths provides none" in message


def test_a_skill_beyond_the_spec_loads_into_an_artifact_with_a_warning(
        tmp_path, make_artifact, make_skill):
    # Like Anthropic's claude-api skill (a 1,068-character description): Claude Code loads it.
    make_skill(tmp_path / "vendor", "long-one", f"name: long-one\ndescription: {'x' * 1100}\n")
    artifact = load(make_artifact(tmp_path, {"L2": ["long-one"]}, paths=["vendor"]))
    assert len(artifact.skills["long-one"].description) == 1100
    [warning] = artifact.warnings
    assert warning.endswith("long-one/SKILL.md: description: is 1100 characters long; the Agent "
                            "Skills specification allows at most 1024")


def test_skill_from_paths_and_every_source_problem_reported(tmp_path, make_artifact, make_skill):
    make_skill(tmp_path / "ours", "deploy")
    make_skill(tmp_path / "ours", "broken", "name: Broken\ndescription: d\n")
    make_skill(tmp_path / "theirs", "deploy")
    message = _error(make_artifact(tmp_path, {"L2": ["deploy"]}, paths=["ours", "theirs"]))
    assert message.startswith("2 problems:")
    assert "skills.paths[0]: " in message and "broken/SKILL.md: name: 'Broken' must be" in message
    assert "skills.paths[1]: skill 'deploy' is defined twice: in " in message
    assert "(from ours) and in " in message and "(from theirs)" in message


def test_a_path_skill_loads_and_a_missing_folder_is_reported_once(tmp_path, make_artifact,
                                                                    make_skill):
    make_skill(tmp_path / "ours", "deploy")
    artifact = load(make_artifact(tmp_path, {"L2": ["deploy"]}, paths=["ours"]))
    assert artifact.skills["deploy"].source == "ours"
    message = _error(make_artifact(tmp_path, {}, paths=["nowhere"]))
    assert message.count("nowhere") == 2  # "folder not found: nowhere (looked for .../nowhere)"
    assert "skills.paths[0]: folder not found: nowhere" in message


def _copy_builtin(tmp_path, monkeypatch):
    root = tmp_path / "builtin"
    shutil.copytree(skill_loader.BUILTIN_ROOT, root,
                    ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    monkeypatch.setattr(skill_loader, "BUILTIN_ROOT", root)
    return root


def test_editing_one_builtin_skill_file_changes_only_the_artifacts_using_it(
        tmp_path, monkeypatch, make_artifact):
    root = _copy_builtin(tmp_path, monkeypatch)
    (tmp_path / "uses").mkdir()
    (tmp_path / "other").mkdir()
    uses = make_artifact(tmp_path / "uses", {"L2": ["swe-workflow"], "L3": ["ui4a-genui"]})
    other = make_artifact(tmp_path / "other", {"L3": ["ui4a-genui"]})
    before_uses, before_other = load(uses), load(other)
    assert load(uses).digest == before_uses.digest  # stable while nothing changes
    form = hcp_loader._digest_form
    old = form(before_uses.doc, before_uses.files, _used(before_uses))
    assert digest_value(old) == before_uses.digest
    assert before_uses.skills["personal-agent"].digest == ""  # unused: not in the digest

    template = root / "swe-workflow" / "references" / "report-template.md"
    template.write_text(template.read_text() + "\nOne more line.\n")
    after_uses, after_other = load(uses), load(other)
    assert after_uses.digest != before_uses.digest
    assert after_other.digest == before_other.digest

    # Nothing else moved: the canonical forms differ in that one skill's digest only.
    new = form(after_uses.doc, after_uses.files, _used(after_uses))
    assert digest_value(new) == after_uses.digest
    assert old.keys() == new.keys()
    assert [k for k in old if old[k] != new[k]] == ["$skills"]
    changed = [k for k in old["$skills"] if old["$skills"][k] != new["$skills"][k]]
    assert changed == ["swe-workflow"]


def _used(artifact):
    return {name: skill.digest for name, skill in sorted(artifact.skills.items()) if skill.digest}


def test_editing_a_path_skill_file_changes_the_digest(tmp_path, make_artifact, make_skill):
    skill = make_skill(tmp_path / "ours", "deploy", files={"scripts/go.sh": "echo go\n"})
    path = make_artifact(tmp_path, {"L2": ["deploy"]}, paths=["ours"])
    before = load(path).digest
    (skill / "scripts" / "go.sh").write_text("echo went\n")
    assert load(path).digest != before


def test_an_artifact_without_adapter_skills_has_no_skill_digests(tmp_path, make_artifact):
    artifact = load(make_artifact(tmp_path, {"L0": []}))
    assert "$skills" not in hcp_loader._digest_form(artifact.doc, artifact.files, _used(artifact))
    assert sorted(artifact.skills) == ["personal-agent", "swe-workflow", "terminal-basics",
                                       "ui4a-genui"]


def test_catalog_is_sorted_stable_and_name_and_description_only(tmp_path, make_artifact):
    artifact = load(make_artifact(tmp_path, {"L2": ["terminal-basics", "swe-workflow"],
                                             "L0": []}))
    catalog = catalog_text(artifact, "L2")
    assert catalog.startswith(CATALOG_HEADER)
    entries = catalog[len(CATALOG_HEADER):].splitlines()
    assert [e.split(":")[0] for e in entries] == ["- swe-workflow", "- terminal-basics"]
    assert entries[0] == "- swe-workflow: " + artifact.skills["swe-workflow"].description
    assert "Reproduce" not in catalog  # the body stays out until load_skill
    assert catalog_text(artifact, "L2") == catalog
    assert catalog_text(load(artifact.path), "L2") == catalog  # and across loads
    assert catalog_text(artifact, "L0") == "" == catalog_text(None, "L2")
    assert with_catalog("You code.\n", artifact, "L2") == "You code.\n\n" + catalog
    assert with_catalog("You chat.", artifact, "L0") == "You chat."
