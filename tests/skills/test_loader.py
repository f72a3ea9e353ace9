"""The skill loader: valid skills, each front-matter violation, mismatches and duplicates."""

from __future__ import annotations

from pathlib import Path

import pytest

from mol.core.errors import SkillError
from mol.skills.loader import (
    BUILTIN_ROOT,
    builtin_skills,
    discover,
    load_all,
    load_skill_folder,
    load_sources,
)

BUILTIN_NAMES = ["personal-agent", "swe-workflow", "terminal-basics", "ui4a-genui"]


def test_valid_skill_keeps_every_field(tmp_path, make_skill):
    front = (
        "name: pdf-tools\n"
        "description: >-\n  Extract text from PDFs.\n  Use for PDF files.\n"
        "license: MIT\n"
        "compatibility: Requires poppler-utils\n"
        "metadata:\n  author: someone\n  version: 1.0\n"
        "allowed-tools: Bash(pdftotext:*) Read\n"
    )
    folder = make_skill(tmp_path, "pdf-tools", front, body="\n\n# Steps\n\n1. Run it.\n\n\n")
    skill = load_skill_folder(folder)
    assert skill.name == "pdf-tools"
    assert skill.description == "Extract text from PDFs. Use for PDF files."
    assert skill.license == "MIT"
    assert skill.compatibility == "Requires poppler-utils"
    assert skill.metadata == {"author": "someone", "version": "1.0"}
    assert skill.allowed_tools == ("Bash(pdftotext:*)", "Read")
    assert skill.body == "# Steps\n\n1. Run it.\n"
    assert skill.warnings == ()
    assert skill.folder == folder.resolve()


def test_allowed_tools_may_be_a_list(tmp_path, make_skill):
    front = "name: lister\ndescription: d\nallowed-tools:\n  - Read\n  - Bash(git:*)\n"
    skill = load_skill_folder(make_skill(tmp_path, "lister", front))
    assert skill.allowed_tools == ("Read", "Bash(git:*)")


def test_unknown_fields_are_kept_and_reported_as_warnings(tmp_path, make_skill):
    front = "name: extra\ndescription: d\nversion: 2\nuser-invocable: true\n"
    skill = load_skill_folder(make_skill(tmp_path, "extra", front))
    assert skill.extra == {"version": 2, "user-invocable": True}
    assert len(skill.warnings) == 2
    assert "SKILL.md: version: unknown field (kept" in skill.warnings[0]
    assert "SKILL.md: user-invocable: unknown field" in skill.warnings[1]


VIOLATIONS = [
    ("description: d\n", "name: required field missing"),
    ("name: x\n", "description: required field missing"),
    ("name: 42\ndescription: d\n", "name: must be a non-empty string, got 42"),
    ("name: ''\ndescription: d\n", "name: must be a non-empty string, got ''"),
    ("name: Bad-Name\ndescription: d\n", "name: 'Bad-Name' must be lowercase letters, digits"),
    ("name: -lead\ndescription: d\n", "name: '-lead' must be lowercase letters"),
    ("name: trail-\ndescription: d\n", "name: 'trail-' must be lowercase letters"),
    ("name: two--hyphens\ndescription: d\n", "without '--'"),
    ("name: under_score\ndescription: d\n", "name: 'under_score' must be lowercase"),
    (f"name: {'a' * 65}\ndescription: d\n", "name: is 65 characters long; at most 64"),
    ("name: x\ndescription: ''\n", "description: must be a non-empty string, got ''"),
    ("name: x\ndescription: '   '\n", "description: must be a non-empty string"),
    ("name: x\ndescription: [a, b]\n", "description: must be a non-empty string, got ['a', 'b']"),
    ("name: x\ndescription: d\nlicense: [MIT]\n", "license: must be a string"),
    ("name: x\ndescription: d\ncompatibility: ''\n", "compatibility: must be a non-empty string"),
    ("name: x\ndescription: d\nmetadata: [1, 2]\n", "metadata: must be a mapping of strings"),
    ("name: x\ndescription: d\nmetadata:\n  a: {b: c}\n", "metadata.a: must be a string"),
    ("name: x\ndescription: d\nallowed-tools: 3\n", "allowed-tools: must be a space-separated"),
    ("name: x\ndescription: d\nallowed-tools: [Read, 3]\n", "allowed-tools: must be a space"),
]


@pytest.mark.parametrize(("front", "expected"), VIOLATIONS,
                         ids=[e.split(":")[0] + str(i) for i, (_, e) in enumerate(VIOLATIONS)])
def test_each_front_matter_violation_names_file_and_field(tmp_path, make_skill, front, expected):
    # The folder is named after the name when the name is valid, so only the violation shows.
    folder = make_skill(tmp_path, "x", front)
    with pytest.raises(SkillError) as caught:
        load_skill_folder(folder)
    message = str(caught.value)
    assert f"{folder.resolve() / 'SKILL.md'}: " in message
    assert expected in message
    assert caught.value.exit_code == 2


@pytest.mark.parametrize(("front", "expected"), [
    (f"name: x\ndescription: {'d' * 1100}\n",
     "description: is 1100 characters long; the Agent Skills specification allows at most 1024"),
    (f"name: x\ndescription: d\ncompatibility: {'c' * 501}\n",
     "compatibility: is 501 characters long; the Agent Skills specification allows at most 500"),
    ("name: x\ndescription: d\nversion: 3\n", "version: unknown field (kept"),
])
def test_spec_limits_the_ecosystem_exceeds_warn_and_fail_only_when_strict(
        tmp_path, make_skill, front, expected):
    folder = make_skill(tmp_path, "x", front)
    skill = load_skill_folder(folder)
    [warning] = skill.warnings
    assert warning.startswith(f"{folder.resolve() / 'SKILL.md'}: ") and expected in warning
    with pytest.raises(SkillError) as caught:
        load_skill_folder(folder, strict=True)
    assert expected in str(caught.value) and caught.value.exit_code == 2


def test_a_skill_reached_twice_through_a_symlink_is_one_skill(tmp_path, make_skill):
    make_skill(tmp_path / "skills", "shared")
    (tmp_path / "mirror").mkdir()
    (tmp_path / "mirror" / "shared").symlink_to(Path("..") / "skills" / "shared")
    skills = load_all([("a", tmp_path / "skills"), ("b", tmp_path / "mirror")])
    assert list(skills) == ["shared"]
    assert skills["shared"].folder == (tmp_path / "skills" / "shared").resolve()
    make_skill(tmp_path / "copy", "shared")  # a real second folder is still a duplicate
    with pytest.raises(SkillError, match="'shared' is defined twice"):
        load_all([("a", tmp_path / "skills"), ("c", tmp_path / "copy")])


def test_name_must_equal_the_folder(tmp_path, make_skill):
    folder = make_skill(tmp_path, "folder-name", "name: other-name\ndescription: d\n")
    with pytest.raises(SkillError, match="name: 'other-name' must equal the folder's name "
                                         "'folder-name'"):
        load_skill_folder(folder)


def test_all_problems_of_one_file_are_reported_together(tmp_path, make_skill):
    folder = make_skill(tmp_path, "x", "name: X\ndescription: ''\nmetadata: 3\n")
    with pytest.raises(SkillError) as caught:
        load_skill_folder(folder)
    assert str(caught.value).startswith("3 problems:")
    assert len(caught.value.problems) == 3


@pytest.mark.parametrize(("text", "expected"), [
    ("# no front matter\n", "must start with a '---' line"),
    ("---\nname: x\ndescription: d\n", "never closed by a '---' line"),
    ("---\nname: x\ndescription: a: b\n---\nbody\n",
     "SKILL.md:3: front matter is not valid YAML: mapping values are not allowed"),
    ("---\nname: x\ndescription: [unclosed\n---\nbody\n",
     "SKILL.md:4: front matter is not valid YAML: did not find expected ',' or ']' "
     "(while parsing a flow sequence on line 3)"),
    ("---\n- a\n- b\n---\nbody\n", "front matter must be a YAML mapping of fields, got list"),
    ("---\n---\nbody\n", "name: required field missing"),
])
def test_malformed_skill_md(tmp_path, text, expected):
    folder = tmp_path / "x"
    folder.mkdir()
    (folder / "SKILL.md").write_text(text)
    with pytest.raises(SkillError) as caught:
        load_skill_folder(folder)
    assert expected in str(caught.value)


def test_yaml_is_parsed_safely(tmp_path):
    folder = tmp_path / "x"
    folder.mkdir()
    (folder / "SKILL.md").write_text(
        "---\nname: x\ndescription: !!python/object/apply:os.system ['true']\n---\n")
    with pytest.raises(SkillError, match="front matter is not valid YAML"):
        load_skill_folder(folder)


def test_not_utf8_and_missing_skill_md(tmp_path):
    folder = tmp_path / "x"
    folder.mkdir()
    with pytest.raises(SkillError, match=r"x: no SKILL.md in this folder"):
        load_skill_folder(folder)
    (folder / "SKILL.md").write_bytes(b"---\nname: x\ndescription: \xff\n---\n")
    with pytest.raises(SkillError, match=r"SKILL.md: not UTF-8 text \(byte 25\)"):
        load_skill_folder(folder)


def test_discover_a_skill_or_a_folder_of_skills(tmp_path, make_skill):
    make_skill(tmp_path, "b-skill")
    make_skill(tmp_path, "a-skill")
    (tmp_path / "notes").mkdir()  # a folder without SKILL.md is not a skill
    assert [p.name for p in discover(tmp_path)] == ["a-skill", "b-skill"]
    assert discover(tmp_path / "a-skill") == [tmp_path / "a-skill"]
    with pytest.raises(SkillError, match="not a folder"):
        discover(tmp_path / "missing")


def test_duplicate_names_across_paths_are_an_error_naming_both(tmp_path, make_skill):
    first, second = tmp_path / "team", tmp_path / "vendor"
    make_skill(first, "review")
    make_skill(second, "review")
    make_skill(second, "other")
    skills, problems = load_sources([("team", first), ("vendor", second)])
    assert sorted(skills) == ["other", "review"]
    assert skills["review"].source == "team"  # the first stays; the clash is still an error
    assert len(problems) == 1
    index, message = problems[0]
    assert index == 1
    assert f"skill 'review' is defined twice: in {(first / 'review').resolve()} (from team)" in message
    assert f"and in {(second / 'review').resolve()} (from vendor)" in message
    with pytest.raises(SkillError, match="defined twice"):
        load_all([("team", first), ("vendor", second)])


def test_a_builtin_name_reused_by_a_path_is_a_duplicate(tmp_path, make_skill):
    make_skill(tmp_path, "swe-workflow")
    with pytest.raises(SkillError, match=r"'swe-workflow' is defined twice: .* \(from builtin\)"):
        load_all([("builtin", BUILTIN_ROOT), ("mine", tmp_path)])


def test_builtin_skills_are_valid_short_and_warning_free():
    skills = builtin_skills()
    assert sorted(skills) == BUILTIN_NAMES
    for skill in skills.values():
        assert skill.source == "builtin"
        assert skill.warnings == ()
        assert skill.license == "Apache-2.0"
        assert 0 < len(skill.body.splitlines()) < 80  # short: well under the spec's 500 lines
    assert skills["swe-workflow"].metadata["adapter"] == "L2"
    assert skills["terminal-basics"].metadata["adapter"] == "L2"
    assert skills["personal-agent"].metadata["adapter"] == "L1"
    assert skills["ui4a-genui"].metadata["adapter"] == "L3"
    body = skills["swe-workflow"].body
    for step in ("Reproduce", "Locate", "Fix", "Run the tests", "Report"):
        assert step in body
