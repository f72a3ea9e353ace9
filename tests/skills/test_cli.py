"""``mol skills list | show | validate``."""

from __future__ import annotations

from pathlib import Path

from mol.cli.main import main

EXAMPLES = Path(__file__).resolve().parents[2] / "hcp" / "examples"
PUBLISHED = Path(__file__).resolve().parent / "published"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["skills", *map(str, argv)])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def test_list_builtin_and_an_artifacts_adapter(capsys):
    code, out, _ = run(capsys, "list")
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()] == [
        "personal-agent", "swe-workflow", "terminal-basics", "ui4a-genui"]
    code, out, _ = run(capsys, "list", "--hcp", EXAMPLES / "venti.toml", "--adapter", "L2")
    assert code == 0
    assert [line.split()[:3] for line in out.splitlines()] == [
        ["swe-workflow", "L2", "builtin"], ["terminal-basics", "L2", "builtin"]]
    code, out, err = run(capsys, "list", "--hcp", EXAMPLES / "venti.toml", "--adapter", "L0")
    assert (code, out, err) == (0, "", "no skills for adapter L0\n")


def test_list_adapter_without_hcp_is_a_usage_error(capsys):
    code, _, err = run(capsys, "list", "--adapter", "L2")
    assert code == 2 and "error: --adapter needs --hcp FILE" in err


def test_show_prints_fields_files_and_body(capsys):
    code, out, _ = run(capsys, "show", "terminal-basics")
    assert code == 0
    head, body = out.split("\n---\n", 1)
    assert "name: terminal-basics\n" in head and "files: scripts/capped.sh" in head
    assert body.startswith("# Terminal basics\n")
    code, _, err = run(capsys, "show", "terminal-basic")
    assert code == 2 and "error: no skill named 'terminal-basic'; did you mean 'terminal-basics'?" in err


def test_show_from_an_artifact_with_a_path_skill(tmp_path, capsys, make_artifact):
    path = make_artifact(tmp_path, {"L2": ["csv-insights"]}, paths=[str(PUBLISHED)])
    code, out, _ = run(capsys, "show", "csv-insights", "--hcp", path)
    assert code == 0
    assert f"source: {PUBLISHED}\n" in out and "allowed-tools: Bash(python3:*) Read\n" in out
    assert "metadata.version: 1.2\n" in out


def test_validate_valid_folders_and_warnings(tmp_path, capsys, make_skill):
    code, out, err = run(capsys, "validate", PUBLISHED)
    assert (code, err) == (0, "")
    assert out == f"{PUBLISHED / 'csv-insights'}: valid (csv-insights)\n"
    make_skill(tmp_path, "odd", "name: odd\ndescription: d\nversion: 3\n")
    code, out, err = run(capsys, "validate", tmp_path / "odd" / "SKILL.md")
    assert (code, err) == (0, "")
    assert out.startswith(f"{tmp_path / 'odd'}: valid (odd) with 1 warning: version: unknown field")


def test_a_long_description_loads_with_a_warning_and_fails_strict(tmp_path, capsys, make_skill):
    make_skill(tmp_path, "long-one", f"name: long-one\ndescription: {'x' * 1100}\n")
    make_skill(tmp_path, "short-one")
    code, out, err = run(capsys, "validate", tmp_path)
    assert (code, err) == (0, "")
    long_line, short_line = out.splitlines()
    assert long_line == (f"{tmp_path / 'long-one'}: valid (long-one) with 1 warning: description: "
                         "is 1100 characters long; the Agent Skills specification allows at most "
                         "1024")
    assert short_line == f"{tmp_path / 'short-one'}: valid (short-one)"
    code, out, err = run(capsys, "validate", "--strict", tmp_path)
    assert code == 2 and err == "error: 1 of 2 skill(s) invalid\n"
    assert out.splitlines()[0].startswith(f"{tmp_path / 'long-one'}: invalid: description: is 1100")
    assert out.splitlines()[1] == f"{tmp_path / 'short-one'}: valid (short-one)"


def test_validate_reports_every_problem_and_exits_2(tmp_path, capsys, make_skill):
    make_skill(tmp_path, "good")
    make_skill(tmp_path, "bad", "name: Bad\ndescription: ''\n")
    make_skill(tmp_path, "mismatch", "name: other\ndescription: d\n")
    code, out, err = run(capsys, "validate", tmp_path)
    assert code == 2 and err == "error: 2 of 3 skill(s) invalid\n"
    bad, good, mismatch = out.splitlines()
    assert bad.startswith(f"{tmp_path / 'bad'}: invalid: name: 'Bad' must be lowercase")
    assert "; description: must be a non-empty string" in bad
    assert good == f"{tmp_path / 'good'}: valid (good)"
    assert mismatch == (f"{tmp_path / 'mismatch'}: invalid: name: 'other' must equal the "
                        "folder's name 'mismatch'")
    code, _, err = run(capsys, "validate", tmp_path / "nothing")
    assert code == 2 and "no such file or folder" in err
    (tmp_path / "empty").mkdir()
    code, _, err = run(capsys, "validate", tmp_path / "empty")
    assert code == 2 and "no SKILL.md in this folder or in its subfolders" in err


def test_validate_counts_a_symlinked_folder_once(tmp_path, capsys, make_skill):
    make_skill(tmp_path, "real")
    (tmp_path / "alias").symlink_to("real")
    code, out, _ = run(capsys, "validate", tmp_path)
    assert code == 0
    assert out.splitlines() == [  # sorted: the link comes first
        f"{tmp_path / 'alias'}: valid (real)",
        f"{tmp_path / 'real'}: valid (real; the same folder as {(tmp_path / 'real').resolve()})"]


def test_list_shows_warnings_of_an_artifacts_skills(tmp_path, capsys, make_artifact, make_skill):
    make_skill(tmp_path / "ours", "odd", "name: odd\ndescription: An odd one.\nversion: 3\n")
    path = make_artifact(tmp_path, {"L1": ["odd", "personal-agent"]}, paths=["ours"])
    code, out, err = run(capsys, "list", "--hcp", path, "--adapter", "L1")
    assert code == 0
    assert [line.split()[:3] for line in out.splitlines()] == [
        ["odd", "L1", "ours"], ["personal-agent", "L1", "builtin"]]
    assert err.startswith("warning: ") and "odd/SKILL.md: version: unknown field" in err
