"""The distribution: every subpackage and data file in the wheel; bare imports banned."""

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE_FOLDERS = ("runtime", "plugins", "hcp", "sandboxes", "skills", "genui", "eval")


def test_wheel_contains_every_subpackage_and_data_file(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(tmp_path), str(ROOT)], check=True, capture_output=True)
    wheel = next(tmp_path.glob("mol_agent-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = set()
    for folder in CODE_FOLDERS:
        for path in (ROOT / folder).rglob("*"):
            if "__pycache__" in path.parts or path.is_dir() or path.suffix == ".pyc":
                continue
            expected.add(f"mol/{path.relative_to(ROOT).as_posix()}")
    missing = sorted(expected - names)
    assert missing == [], f"files missing from the wheel: {missing[:10]}"
    assert "mol/hcp/schema.json" in names and "mol/hcp/examples/prompts/router.md" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "mol = mol.cli.main:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_bare_imports_are_rejected_by_the_linter(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import runtime\nfrom hcp import schema\nimport sandboxes.docker\n")
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--config",
         str(ROOT / "pyproject.toml"), "--select", "TID251", str(bad)],
        capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stdout.count("TID251") == 3


def test_the_tree_passes_the_linter():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(ROOT)],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout[-3000:]
