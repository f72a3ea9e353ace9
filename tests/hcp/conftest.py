"""Fixtures for HCP tests: a scratch copy of a shipped example."""

import shutil
from pathlib import Path

import pytest

from ..conftest import hcp_text as hcp_text  # re-exported for the tests here

EXAMPLES = Path(__file__).resolve().parents[2] / "hcp" / "examples"


@pytest.fixture
def venti(tmp_path: Path) -> Path:
    """A private copy of hcp/examples (venti.toml and its prompts); returns venti.toml."""
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    return tmp_path / "examples" / "venti.toml"
