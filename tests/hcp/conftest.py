"""Fixtures for HCP tests: a scratch copy of a shipped example, and the folders under
``fixtures/`` (a Claude Code plugin bundle, a Claude Code project, a Codex home)."""

import shutil
from pathlib import Path

import pytest

from ..conftest import hcp_text as hcp_text  # re-exported for the tests of this folder
from ..harness_profile import FILES as FILES  # a reference-style profile folder (test_harness)
from ..harness_profile import IDENTITY as IDENTITY
from ..harness_profile import ROUTE_TEXT as ROUTE_TEXT
from ..harness_profile import write_profile as write_profile

EXAMPLES = Path(__file__).resolve().parents[2] / "hcp" / "examples"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
BUNDLE = FIXTURES / "demo-plugin"
"""A Claude Code plugin: two skill folders (one a symlink of the other), a command, hooks
(a PreToolUse guard and an event mol does not have) and a stdio MCP server."""


@pytest.fixture
def venti(tmp_path: Path) -> Path:
    """A private copy of hcp/examples (venti.toml and its prompts); returns venti.toml."""
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    return tmp_path / "examples" / "venti.toml"
