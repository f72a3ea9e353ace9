"""``mol genui check`` and ``mol genui setup`` as a person runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).parents[1] / "genui" / "data"


def mol(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-m", "mol.cli", *args], capture_output=True,
                          text=True, timeout=120, check=False, env={**os.environ, **(env or {})})


@pytest.mark.genui
def test_check_prints_valid():
    done = mol("genui", "check", str(DATA / "counter.tsx"))
    assert (done.returncode, done.stdout) == (0, f"{DATA / 'counter.tsx'}: tsx: valid\n")


@pytest.mark.genui
def test_check_prints_each_problem_and_exits_1(tmp_path):
    path = tmp_path / "ui.jsonl"
    path.write_text('{"version": "v0.9", "createSurface": {"surfaceId": "s"}}\n{"oops"\n')
    done = mol("genui", "check", str(path))
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        f"{path}: a2ui: line 2, column 8: not valid JSON: Expecting ':' delimiter"]
    as_json = json.loads(mol("genui", "check", "--json", str(path)).stdout)
    assert as_json[0]["valid"] is False and as_json[0]["problems"][0]["rule"] == "json"


def test_without_the_toolchain_the_error_names_setup(tmp_path):
    done = mol("genui", "check", str(DATA / "counter.tsx"),
               env={"MOL_GENUI_HOME": str(tmp_path / "none")})
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "run `mol genui setup`" in done.stderr


@pytest.mark.genui
def test_setup_says_where_the_cache_is():
    done = mol("genui", "setup")
    assert done.returncode == 0 and "up to date" in done.stderr
    assert Path(done.stdout.strip(), "assets", "a2ui.js").is_file()
