"""The evolve example suite run once under the scripted engine: the parent run the evolve
tests share (read only: each test works in a lab and run folders of its own)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mol.cli.main import main
from mol.runtime.testing import ScriptedEngine

from ..conftest import EXAMPLES
from ..conftest import hcp_text as hcp_text  # re-exported for the tests here
from ..conftest import mol as mol  # re-exported for the tests here
from ..conftest import mol_json as mol_json

SUITE = EXAMPLES / "evolve"
HCP = EXAMPLES / "evolve-hcp.toml"
SCRIPT = EXAMPLES / "evolve-script.toml"
PATCHES = EXAMPLES / "evolve-patches"

PARENT_OUTCOMES = {"guard-logs": "pass", "make-dirs": "pass", "release-notes": "pass"}
"""The tasks that pass under evolve-hcp.toml (the ten line-* and script-* tasks fail)."""


@pytest.fixture(scope="module")
def engine() -> Iterator[ScriptedEngine]:
    """The scripted engine of a test module (an engine serving the same script and seed is
    the same model: the parent run's results hold for it)."""
    with ScriptedEngine.serve(SCRIPT) as running:
        yield running


@pytest.fixture(scope="session")
def parent_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example suite's run under evolve-hcp.toml, made once (by an engine of its own, so
    that no engine outlives the tests that use it)."""
    out = tmp_path_factory.mktemp("parent") / "run"
    with ScriptedEngine.serve(SCRIPT) as engine:
        assert main(["eval", "run", str(SUITE), "--hcp", str(HCP), "--engine-url",
                     engine.base_url, "--out", str(out), "-j", "4"]) == 0
    return out
