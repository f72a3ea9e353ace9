"""The load_skill and read_skill_file tools, registered by the built-in plugin."""

from __future__ import annotations

import os

import pytest

from mol.core.tools import ToolContext, run_tool
from mol.hcp.loader import load
from mol.plugins.manager import PluginManager
from mol.skills.files import MAX_FILE_BYTES


@pytest.fixture
def tools():
    manager = PluginManager([], builtin=("mol.plugins.builtin.skills",))
    assert manager.failures == []
    return manager.tools


@pytest.fixture
def artifact(tmp_path, make_artifact, make_skill):
    """L2 lists swe-workflow and a path skill 'kit' with assorted files; L1 lists personal-agent."""
    kit = make_skill(tmp_path / "skills", "kit", body="# Kit\n\nUse the kit.\n", files={
        "references/guide.md": "Guide text.\n",
        "assets/logo.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00",
        "assets/big.txt": "x" * (MAX_FILE_BYTES + 10),
        "assets/euro.txt": "a" * (MAX_FILE_BYTES - 1) + "€€",
    })
    (tmp_path / "secret.txt").write_text("top secret\n")
    os.symlink(tmp_path / "secret.txt", kit / "references" / "escape.md")
    os.symlink(kit / "references" / "guide.md", kit / "inside.md")
    return load(make_artifact(tmp_path, {"L2": ["swe-workflow", "kit"], "L1": ["personal-agent"],
                                         "L0": []}, paths=["skills"]))


async def call(tools, name, arguments, artifact, adapter="L2"):
    return await run_tool(tools[name], arguments, ToolContext(adapter=adapter, artifact=artifact))


def test_schemas_show_only_the_model_arguments(tools):
    assert tools["load_skill"].parameters["required"] == ["name"]
    assert list(tools["read_skill_file"].parameters["properties"]) == ["skill", "path",
                                                                      "to_workspace"]
    assert tools["read_skill_file"].parameters["required"] == ["skill", "path"]
    assert tools["load_skill"].description.startswith("Load the instructions of one of your skills")


@pytest.mark.anyio
async def test_load_skill_returns_the_body_and_the_files(tools, artifact):
    result = await call(tools, "load_skill", {"name": "kit"}, artifact)
    assert not result.is_error
    assert result.content.startswith("# Skill: kit\n\n# Kit\n\nUse the kit.\n")
    assert "read_skill_file(skill=\"kit\", path=...)" in result.content
    for listed in ("assets/big.txt", "assets/logo.png", "inside.md", "references/guide.md"):
        assert f"- {listed}\n" in result.content
    assert "escape.md" not in result.content  # a link leading outside is not offered
    assert result.data["files"] == ["assets/big.txt", "assets/euro.txt", "assets/logo.png",
                                    "inside.md", "references/guide.md"]
    builtin = await call(tools, "load_skill", {"name": "swe-workflow"}, artifact)
    assert artifact.skills["swe-workflow"].body in builtin.content
    assert "- references/report-template.md\n" in builtin.content


@pytest.mark.anyio
async def test_a_skill_not_listed_for_the_adapter_is_refused(tools, artifact):
    result = await call(tools, "load_skill", {"name": "personal-agent"}, artifact)  # L1's, not L2's
    assert result.is_error
    assert result.content == ("Error: skill 'personal-agent' is not available to adapter L2; "
                              "its skills are: kit, swe-workflow.")
    result = await call(tools, "read_skill_file", {"skill": "personal-agent",
                                                   "path": "references/confirmations.md"}, artifact)
    assert result.is_error and "not available to adapter L2" in result.content
    result = await call(tools, "load_skill", {"name": "swe-workflw"}, artifact)
    assert result.content.endswith("Did you mean 'swe-workflow'?")
    result = await call(tools, "load_skill", {"name": "kit"}, artifact, adapter="L0")
    assert result.content == "Error: adapter L0 has no skills; 'kit' cannot be loaded"
    result = await call(tools, "load_skill", {"name": "kit"}, None)
    assert result.is_error and "no HCP artifact" in result.content


@pytest.mark.anyio
async def test_read_skill_file_reads_inside_the_folder(tools, artifact):
    result = await call(tools, "read_skill_file", {"skill": "kit", "path": "references/guide.md"},
                        artifact)
    assert (result.content, result.is_error) == ("Guide text.\n", False)
    linked = await call(tools, "read_skill_file", {"skill": "kit", "path": "inside.md"}, artifact)
    assert linked.content == "Guide text.\n"  # a link that stays inside is fine
    own = await call(tools, "read_skill_file", {"skill": "kit", "path": "./SKILL.md"}, artifact)
    assert own.content.startswith("---\nname: kit\n")


@pytest.mark.anyio
@pytest.mark.parametrize(("path", "expected"), [
    ("/etc/passwd", "'/etc/passwd' is absolute"),
    ("C:\\Windows\\win.ini", "is absolute"),
    ("../secret.txt", "contains '..'"),
    ("references/../../secret.txt", "contains '..'"),
    ("references/escape.md", "leads outside the skill folder (a symbolic link)"),
    ("", "path is empty"),
    ("references/missing.md", "skill 'kit' has no file 'references/missing.md'; its files: "
                              "assets/big.txt, assets/euro.txt"),
])
async def test_read_skill_file_confinement(tools, artifact, path, expected):
    result = await call(tools, "read_skill_file", {"skill": "kit", "path": path}, artifact)
    assert result.is_error
    assert expected in result.content
    assert "top secret" not in result.content


@pytest.mark.anyio
async def test_binary_files_are_described_and_large_ones_cut(tools, artifact):
    binary = await call(tools, "read_skill_file", {"skill": "kit", "path": "assets/logo.png"},
                        artifact)
    assert binary.content == "[assets/logo.png is a binary file of 11 bytes; it cannot be " \
                             "shown as text]"
    big = await call(tools, "read_skill_file", {"skill": "kit", "path": "assets/big.txt"}, artifact)
    assert big.content.startswith("x" * MAX_FILE_BYTES + "\n[... cut: showed the first "
                                  f"{MAX_FILE_BYTES} of {MAX_FILE_BYTES + 10} bytes")
    # A cut through a multi-byte character is text, not binary: the partial character is dropped.
    euro = await call(tools, "read_skill_file", {"skill": "kit", "path": "assets/euro.txt"},
                      artifact)
    assert euro.content.startswith("a" * (MAX_FILE_BYTES - 1) + "\n[... cut: showed the first "
                                   f"{MAX_FILE_BYTES - 1} of {MAX_FILE_BYTES + 5} bytes")


@pytest.mark.anyio
async def test_invalid_arguments_are_reported_to_the_model(tools, artifact):
    result = await call(tools, "read_skill_file", {"skill": "kit"}, artifact)
    assert result.is_error and "path: Field required" in result.content
