"""The README's commands run as written."""

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def sh_blocks() -> list[str]:
    return re.findall(r"```sh\n(.*?)```", README, re.S)


def commands(script: str) -> list[str]:
    """A shell script's commands: its lines but comments, blank lines, set, cd, export and
    echo."""
    return [line.strip() for line in script.splitlines() if line.strip() and not re.match(
        r"(#|set |cd |export |echo )", line.strip())]


def test_readme_names_the_test_command_ci_runs():
    """The README's test command is ./test, which ends by running pytest with its arguments;
    CI runs the README's install command (without the local extra), then exactly it."""
    section = README[README.index("## Test"):README.index("## Layout")]
    [test] = [b.strip() for b in re.findall(r"```sh\n(.*?)```", section, re.S)]
    assert test == "./test"
    script = ROOT / "test"
    assert os.access(script, os.X_OK) and script.read_text().startswith("#!/usr/bin/env bash")
    assert commands(script.read_text())[-1] == 'exec python3 -m pytest "$@"'
    install = "python3 -m pip install -e '.[test]'"
    assert install in [b.strip() for b in sh_blocks()] or f"`{install}`" in README
    assert commands((ROOT / ".ci" / "run").read_text()) == [install.replace("-e", "-q -e"),
                                                            test]


def test_validate_command_checks_the_shipped_artifact():
    [run] = [b.strip() for b in sh_blocks() if b.startswith("mol hcp validate")]
    out = subprocess.run(run, shell=True, cwd=ROOT, capture_output=True, text=True, check=True)
    assert re.search(r"valid \(venti\) sha256:[0-9a-f]{64}", out.stdout)


def test_scripted_demo_runs_a_turn():
    demo = next(b for b in sh_blocks() if "mol engine scripted" in b)
    serve, run = demo.strip().splitlines()
    assert serve.endswith("&")
    script = (f"{serve}\nPID=$!\ntrap 'kill $PID' EXIT\n"
              "for i in $(seq 600); do curl -sf http://127.0.0.1:8300/v1/models >/dev/null "
              "&& break; sleep 0.1; done\n" + run + "\n")
    out = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert '"type": "route", "adapter": "L0"' in out.stdout
    assert "Autumn moonlight" in out.stdout
