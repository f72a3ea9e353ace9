"""The npm toolchain's cache: missing or stale means a clear error naming mol genui setup,
and mol imports (and runs everything else) without Node at all."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from mol.core.errors import GenUISetupError
from mol.genui import toolchain


def test_a_missing_cache_names_the_setup_command(tmp_path, monkeypatch):
    monkeypatch.setenv(toolchain.HOME_ENV, str(tmp_path / "empty"))
    with pytest.raises(GenUISetupError, match="mol genui setup"):
        toolchain.find()


def test_a_cache_built_from_other_pins_is_stale(tmp_path, monkeypatch):
    monkeypatch.setenv(toolchain.HOME_ENV, str(tmp_path))
    (tmp_path / toolchain.STAMP).write_text("0123456789abcdef\n")
    with pytest.raises(GenUISetupError, match="another version of mol"):
        toolchain.find()


def test_the_installed_cache_is_ready(chain):
    assert (chain.assets / "a2ui.js").is_file() and (chain.assets / "react.js").is_file()
    assert (chain.a2ui_schemas() / "v0_9" / "schemas" / "server_to_client.json").is_file()
    assert (chain.modules / "@a2ui" / "lit" / "package.json").is_file()


def test_setup_is_idempotent(chain):
    said = []
    again = toolchain.setup(say=said.append)
    assert again.home == chain.home and said == [f"the GenUI toolchain in {chain.home} is "
                                                 "up to date"]


def test_mol_imports_without_node(tmp_path):
    """With no node or npm on PATH, the GenUI modules import and an adapter with genui on
    still loads; only a check says what to install."""
    script = (
        "import mol.genui.checker, mol.genui.review, mol.genui.web, mol.server.app\n"
        "from mol.genui import toolchain\n"
        "from mol.core.errors import GenUISetupError\n"
        "try:\n    toolchain.find()\nexcept GenUISetupError as exc:\n    print(exc)\n")
    env = {**os.environ, "PATH": str(tmp_path), toolchain.HOME_ENV: str(tmp_path / "none")}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "is not installed" in done.stdout and "mol genui setup" in done.stdout
