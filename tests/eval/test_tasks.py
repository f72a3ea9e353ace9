"""Task folders and suites: what task.toml says, what is missing, which tasks a glob picks."""

from __future__ import annotations

from pathlib import Path

import pytest

from mol.core.errors import TaskError
from mol.eval.tasks import AGENT_TIMEOUT, load_suite, load_task, parse_config

from .conftest import SUITE, write_task


def test_task_toml_fields_are_read_and_unknown_ones_noted() -> None:
    config = parse_config("""
version = "1.0"
[metadata]
tags = ["guard", 3]
author_name = "x"
[agent]
timeout_sec = 30
[verifier]
timeout_sec = 12.5
pass_threshold = 0.5
[environment]
build_timeout_sec = 100
cpus = 2
memory_mb = 1024
storage_mb = 2048
allow_internet = true
gpus = 1
[solution]
env = { A = "1" }
""", "task t: task.toml")
    assert (config.agent_timeout, config.verifier_timeout, config.build_timeout) == (30, 12.5, 100)
    assert (config.pass_threshold, config.cpus, config.memory_mb, config.storage_mb) == (
        0.5, 2, 1024, 2048)
    assert config.allow_internet is True
    assert config.tags == ["guard"]
    assert config.notes == ("task t: task.toml: [environment] gpus is kept but ignored",
                            "task t: task.toml: [solution] is kept but ignored")


def test_defaults_apply_to_an_empty_task_toml() -> None:
    config = parse_config("", "t")
    assert config.agent_timeout == AGENT_TIMEOUT and config.pass_threshold == 1.0
    assert config.cpus is None and not config.allow_internet and config.notes == ()


@pytest.mark.parametrize(("text", "message"), [
    ("[agent]\ntimeout_sec = 'soon'", "[agent] timeout_sec must be a number, got 'soon'"),
    ("[agent]\ntimeout_sec = 0", "[agent] timeout_sec must be above 0, got 0"),
    ("[environment]\nallow_internet = 1", "allow_internet must be true or false, got 1"),
    ("[environment]\nmemory_mb = true", "memory_mb must be a number, got True"),
    ("[agent\n", "invalid TOML"),
    ("metadata = 3", "[metadata] must be a table"),
])
def test_bad_task_toml_is_a_task_error_naming_the_key(text: str, message: str) -> None:
    with pytest.raises(TaskError, match="task.toml") as caught:
        parse_config(text, "task x: task.toml")
    assert message in str(caught.value)


def test_missing_files_and_empty_instructions_are_named(tmp_path: Path) -> None:
    folder = write_task(tmp_path, "t", test="true")
    (folder / "tests" / "test.sh").unlink()
    with pytest.raises(TaskError, match=r"task t: .*tests/test.sh is missing"):
        load_task(folder)
    (folder / "tests" / "test.sh").write_text("true")
    (folder / "instruction.md").write_text("  \n")
    with pytest.raises(TaskError, match="instruction.md is empty"):
        load_task(folder)
    (folder / "instruction.md").write_bytes(b"\xff\xfe")
    with pytest.raises(TaskError, match="not UTF-8"):
        load_task(folder)


def test_a_suite_is_its_task_folders_sorted_and_a_glob_selects(tmp_path: Path) -> None:
    for name in ("b-two", "a-one", "c-three"):
        write_task(tmp_path, name, test="true")
    (tmp_path / "notes").mkdir()  # not a task folder: skipped
    assert [t.name for t in load_suite(tmp_path)] == ["a-one", "b-two", "c-three"]
    assert [t.name for t in load_suite(tmp_path, "*-t*")] == ["b-two", "c-three"]
    assert [t.name for t in load_suite(tmp_path / "a-one")] == ["a-one"]
    with pytest.raises(TaskError, match=r"no task matches --tasks 'z\*'"):
        load_suite(tmp_path, "z*")
    with pytest.raises(TaskError, match="no task folders"):
        load_suite(tmp_path / "notes")
    with pytest.raises(TaskError, match="no such folder"):
        load_suite(tmp_path / "missing")


def test_the_digest_follows_every_file_of_the_folder(tmp_path: Path) -> None:
    folder = write_task(tmp_path, "t", test="true")
    before = load_task(folder).digest
    (folder / "tests" / "data.txt").write_text("x")
    assert load_task(folder).digest != before


def test_the_example_suite_has_eight_tasks_each_with_an_oracle() -> None:
    tasks = load_suite(SUITE)
    assert len(tasks) == 8
    assert all(task.solution is not None for task in tasks)
    assert all(task.config.notes == () for task in tasks)
    assert sum(task.environment is not None for task in tasks) == 7
