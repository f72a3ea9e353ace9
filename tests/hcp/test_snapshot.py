"""A snapshot is a self-contained copy of an artifact that loads with the same digest."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from mol.hcp.loader import load
from mol.hcp.snapshot import entries, load_snapshot, write, write_entries

from .conftest import hcp_text


def test_a_snapshot_keeps_the_digest_and_outlives_the_original(venti: Path,
                                                               tmp_path: Path) -> None:
    artifact = load(venti)
    write(artifact, tmp_path / "snap")
    shutil.rmtree(venti.parent)  # the copy needs nothing of the original folder
    copy = load_snapshot(tmp_path / "snap")
    assert copy.digest == artifact.digest
    router = artifact.prompt_text(artifact.doc.router.prompt)
    assert copy.prompt_text(copy.doc.router.prompt) == router


def test_hook_scripts_and_skill_folders_travel_with_their_modes(tmp_path: Path) -> None:
    (tmp_path / "hooks").mkdir()
    hook = tmp_path / "hooks" / "check.sh"
    hook.write_text("#!/bin/sh\nexit 0\n")
    os.chmod(hook, 0o755)
    skill = tmp_path / "skills" / "greet"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: greet\ndescription: Say hello.\n---\nHello.\n")
    (tmp_path / "p.md").write_text("Route it.")
    source = tmp_path / "mol.toml"
    source.write_text(hcp_text("""
[adapters.L2]
skills = ["greet"]
[skills]
paths = ["skills"]
builtin = false
[[hooks.PreToolUse]]
matcher = "terminal"
hooks = [{ command = "hooks/check.sh --quiet" }]
""").replace('prompt = "Route the turn."', 'prompt = { path = "p.md" }'))
    artifact = load(source)
    items = {path: mode for path, _, mode in entries(artifact)}
    assert items["hcp.toml"] == 0o644
    assert next(mode for path, mode in items.items() if path.endswith("check.sh")) == 0o755
    assert any(path.endswith("greet/SKILL.md") for path in items)
    folder = tmp_path / "elsewhere"
    write_entries(entries(artifact), folder)
    copy = load_snapshot(folder)
    assert copy.digest == artifact.digest and copy.skills["greet"].body.strip() == "Hello."
    command = copy.doc.hooks.PreToolUse[0].hooks[0].command
    assert command.startswith("files/") and command.endswith("check.sh --quiet")
    assert os.access(folder / command.split()[0], os.X_OK)
