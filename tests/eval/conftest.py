"""Fixtures for the eval tests: the example suite, small suites written on the spot, and
``mol eval`` run in-process against the scripted engine.

The tests that run episodes use the real Docker engine and the default sandbox image
(CI starts one and builds it); they are marked ``docker``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mol.cli.main import main
from mol.runtime.testing import ScriptedEngine

from ..conftest import hcp_text as hcp_text  # re-exported for the tests here
from ..harbormodels import trajectory_model as trajectory_model  # Harbor's ATIF model

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

EXAMPLES = Path(__file__).resolve().parents[2] / "eval" / "examples"
SUITE = EXAMPLES / "terminal"
HCP = EXAMPLES / "terminal-hcp.toml"
SCRIPT = EXAMPLES / "terminal-script.toml"

SCRIPTED_OUTCOMES = {
    "csv-to-json": "pass", "find-todo": "pass", "fix-python-test": "pass",
    "git-tag-release": "pass", "log-status-counts": "pass",
    "permissions-fix": "fail", "service-config": "fail", "write-script": "fail",
}
"""What terminal-script.toml makes of each task of the example suite (its header says so)."""
L1_TASKS = {"git-tag-release", "permissions-fix", "service-config"}
"""The example tasks the script routes to L1 (the rest go to L2)."""


@pytest.fixture(scope="session")
def engine() -> Iterator[ScriptedEngine]:
    """The scripted engine serving terminal-script.toml (its ``requests`` are what it got)."""
    with ScriptedEngine.serve(SCRIPT) as running:
        yield running


@pytest.fixture(scope="session")
def oracle_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example suite run by its oracle solutions (``-j 4``), shared by the tests."""
    out = tmp_path_factory.mktemp("oracle")
    assert main(["eval", "run", str(SUITE), "--hcp", str(HCP), "--agent", "oracle",
                 "--out", str(out), "-j", "4"]) == 0
    return out


@pytest.fixture(scope="session")
def scripted_run(tmp_path_factory: pytest.TempPathFactory, engine: ScriptedEngine) -> Path:
    """The example suite run against the scripted engine (``-j 4``), shared by the tests."""
    out = tmp_path_factory.mktemp("scripted")
    assert main(["eval", "run", str(SUITE), "--hcp", str(HCP), "--engine-url", engine.base_url,
                 "--out", str(out), "-j", "4"]) == 0
    return out


def mol(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run ``mol ARGV`` in-process; returns (exit code, stdout, stderr)."""
    capsys.readouterr()
    code = main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return code, out, err


def mol_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    """``mol ARGV --json``'s output: one object, or the list of JSON lines."""
    code, out, err = mol(capsys, *argv, "--json")
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    return lines[0] if len(lines) == 1 else lines


def write_task(root: Path, name: str, *, test: str, solve: str | None = None,
               toml: str = "", instruction: str | None = None,
               dockerfile: str | None = None) -> Path:
    """A task folder ``root/name`` with the given verifier, solution and task.toml body."""
    folder = root / name
    (folder / "tests").mkdir(parents=True)
    (folder / "task.toml").write_text('version = "1.0"\n' + toml)
    (folder / "instruction.md").write_text(instruction or f"Do the {name} task.\n")
    (folder / "tests" / "test.sh").write_text("#!/bin/bash\n" + test + "\n")
    if solve is not None:
        (folder / "solution").mkdir()
        (folder / "solution" / "solve.sh").write_text("#!/bin/bash\n" + solve + "\n")
    if dockerfile is not None:
        (folder / "environment").mkdir()
        (folder / "environment" / "Dockerfile").write_text(dockerfile)
    return folder


PASS = "echo 1 > /logs/verifier/reward.txt"
"""A verifier that always passes."""


@pytest.fixture
def task_factory(tmp_path: Path) -> Callable[..., Path]:
    """``task_factory(name, **fields)`` writes a task into ``tmp_path/suite``."""
    suite = tmp_path / "suite"

    def make(name: str, **fields: Any) -> Path:
        fields.setdefault("test", PASS)
        return write_task(suite, name, **fields)

    return make
