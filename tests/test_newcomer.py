"""A newcomer follows the README: on a fresh venv, the two set-up commands run exactly as
written and the second prints an answer (from the real small model, started on demand)."""

import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]


def setup_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Set up"):text.index("## Test")]
    first = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return first.strip().splitlines()


@pytest.mark.slow
@pytest.mark.local_engine
def test_readme_setup_on_a_fresh_venv(tmp_path):
    install, run = setup_commands()
    assert "pip install" in install and run.startswith("mol run")
    with pytest.raises(httpx.ConnectError):  # mol run must start the engine itself
        httpx.get("http://127.0.0.1:8080/v1/models", timeout=2)
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MOL_HCP")}
    environ.update(PATH=f"{env_dir / 'bin'}{os.pathsep}{environ['PATH']}",
                   VIRTUAL_ENV=str(env_dir), PIP_DISABLE_PIP_VERSION_CHECK="1")
    for command, limit in ((install, 1500), (run, 300)):
        done = subprocess.run(["bash", "-c", command], cwd=ROOT, env=environ, text=True,
                              capture_output=True, timeout=limit)
        assert done.returncode == 0, f"{command}\n{done.stderr[-3000:]}"
    assert (env_dir / "bin" / "mol").exists()  # the venv's own mol ran, not the system's
    assert done.stdout.strip(), "the second command printed no answer"
    assert sys.prefix != str(env_dir)
