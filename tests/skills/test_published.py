"""A skill published by another project in the Agent Skills format loads unchanged."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mol.core.tools import ToolContext
from mol.hcp.digest import digest_tree
from mol.plugins.builtin.skills import load_skill, read_skill_file
from mol.skills.files import list_files
from mol.skills.loader import load_skill_folder

PUBLISHED = Path(__file__).resolve().parent / "published"


def test_published_skill_loads_with_every_field_and_no_warning():
    folder = PUBLISHED / "csv-insights"
    before = digest_tree(folder)
    skill = load_skill_folder(folder, source="published")
    assert digest_tree(folder) == before  # loading never touches the folder
    assert skill.name == "csv-insights"
    assert skill.description.startswith("Summarize CSV files - column types")
    assert skill.license == "MIT"
    assert skill.compatibility == "Requires Python 3.9+ (standard library only)"
    assert skill.metadata == {"author": "example-data-team", "version": "1.2"}
    assert skill.allowed_tools == ("Bash(python3:*)", "Read")
    assert skill.warnings == () and skill.extra == {}
    text = (folder / "SKILL.md").read_text()
    assert skill.body == text.split("---\n", 2)[2].lstrip("\n")  # the body, byte for byte
    assert list_files(skill) == ["assets/report-template.md", "references/REFERENCE.md",
                                 "scripts/profile_csv.py"]


@pytest.mark.anyio
async def test_published_skill_through_an_artifact_and_the_tools(tmp_path, make_artifact):
    shutil.copytree(PUBLISHED, tmp_path / "vendor")
    from mol.hcp.loader import load

    artifact = load(make_artifact(tmp_path, {"L2": ["csv-insights", "swe-workflow"]},
                                  paths=["vendor"]))
    assert artifact.skills["csv-insights"].source == "vendor"
    context = ToolContext(adapter="L2", artifact=artifact)
    loaded = load_skill("csv-insights", context)
    assert not loaded.is_error
    assert "python3 scripts/profile_csv.py data.csv" in loaded.content
    assert "- references/REFERENCE.md\n" in loaded.content
    reference = await read_skill_file("csv-insights", "references/REFERENCE.md", context)
    assert reference.content == (PUBLISHED / "csv-insights/references/REFERENCE.md").read_text()


def test_published_script_runs_as_documented(tmp_path):
    # The skill's own script works from a copy, as an agent would run it in a workspace.
    data = tmp_path / "data.csv"
    data.write_text("city,population\nOslo,709000\nBergen,\nOslo,1\n")
    script = PUBLISHED / "csv-insights" / "scripts" / "profile_csv.py"
    out = subprocess.run([sys.executable, str(script), str(data)], capture_output=True,
                         text=True, check=True, timeout=30).stdout.splitlines()
    assert out == [
        '{"column": "city", "missing": 0, "type": "text", "top": [["Oslo", 2], ["Bergen", 1]]}',
        '{"column": "population", "missing": 1, "type": "number", "min": 1.0, "max": 709000.0}',
    ]
