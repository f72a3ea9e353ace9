"""The README's commands run as written."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def sh_blocks() -> list[str]:
    return re.findall(r"```sh\n(.*?)```", README, re.S)


def test_readme_names_the_test_command_ci_runs():
    assert "python3 -m pytest" in [b.strip() for b in sh_blocks()]
    assert "python3 -m pytest\n" in (ROOT / ".ci" / "run").read_text()


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
