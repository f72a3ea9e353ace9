"""Fixtures for skill tests: write skill folders and HCP artifacts in a scratch folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from mol.hcp.loader import Artifact, load

from ..conftest import hcp_text


def write_skill(root: Path, folder: str, front: str | None = None, body: str = "Do it.\n",
                files: dict[str, str | bytes] | None = None) -> Path:
    """Write ``root/folder/SKILL.md`` (front matter ``front``, default: a valid one) and files."""
    skill = root / folder
    skill.mkdir(parents=True, exist_ok=True)
    if front is None:
        front = f"name: {folder}\ndescription: Test skill {folder}; use it in tests.\n"
    (skill / "SKILL.md").write_text(f"---\n{front}---\n{body}", encoding="utf-8")
    for relative, content in (files or {}).items():
        path = skill / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return skill


def write_artifact(folder: Path, adapters: dict[str, list[str]], paths: list[str] = (),
                   builtin: bool = True, name: str = "t") -> Path:
    """Write ``folder/a.toml`` whose adapters list the given skills."""
    lines = [
        "[skills]", f"paths = {list(paths)!r}".replace("'", '"'),
        f"builtin = {'true' if builtin else 'false'}",
    ]
    for adapter, skills in adapters.items():
        lines += [f"[adapters.{adapter}]", f"skills = {skills!r}".replace("'", '"')]
    path = folder / "a.toml"
    path.write_text(hcp_text("\n".join(lines), name=name, router_prompt="route"),
                    encoding="utf-8")
    return path


@pytest.fixture
def project(tmp_path: Path):
    """A scratch artifact folder: ``project(adapters, paths=..., builtin=...)`` -> Artifact."""

    def make(adapters: dict[str, list[str]], paths: list[str] = (),
             builtin: bool = True) -> Artifact:
        return load(write_artifact(tmp_path, adapters, paths, builtin))

    return make


@pytest.fixture
def make_skill():
    """``make_skill(root, folder, front=None, body=..., files=None)`` writes a skill folder."""
    return write_skill


@pytest.fixture
def make_artifact():
    """``make_artifact(folder, adapters, paths=(), builtin=True)`` writes ``folder/a.toml``."""
    return write_artifact
