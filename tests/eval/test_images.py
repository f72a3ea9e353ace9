"""Task images: built once per content digest from a local base, failures named."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from mol.core.errors import SandboxError
from mol.eval.images import ensure_image, image_tag
from mol.eval.tasks import load_task
from mol.sandboxes import docker

pytestmark = pytest.mark.docker


def test_an_environment_is_built_once_and_found_by_its_digest(
        task_factory: Callable[..., Path]) -> None:
    folder = task_factory("built", dockerfile="FROM mol-sandbox:bookworm\n"
                          "COPY data.txt /workspace/data.txt\n")
    (folder / "environment" / "data.txt").write_text(f"made for {folder}\n")
    task = load_task(folder)
    tag = image_tag(task)
    lines: list[str] = []
    try:
        assert anyio.run(ensure_image, task, "mol-sandbox:bookworm", lines.append) == tag
        assert lines[0] == f"building {tag} for task built" and lines[-1] == f"built {tag}"
        assert any(line.strip().startswith("Step 2/3 : COPY") for line in lines)
        again: list[str] = []
        assert anyio.run(ensure_image, task, "mol-sandbox:bookworm", again.append) == tag
        assert again == []  # found by its tag: nothing was built
        (folder / "environment" / "data.txt").write_text("changed\n")
        assert image_tag(load_task(folder)) != tag
    finally:
        docker.client().api.remove_image(tag, force=True)


def test_a_task_without_an_environment_uses_the_default_image(
        task_factory: Callable[..., Path]) -> None:
    task = load_task(task_factory("plain"))
    assert image_tag(task) is None
    assert anyio.run(ensure_image, task, "mol-sandbox:bookworm") == "mol-sandbox:bookworm"


def test_a_failing_build_says_why(task_factory: Callable[..., Path]) -> None:
    folder = task_factory("broken", dockerfile=f"FROM mol-sandbox:bookworm\n"
                          f"RUN echo 'about to fail {folder_marker()}' && exit 7\n")
    with pytest.raises(SandboxError, match="building image mol-task:.* failed: The command "
                       r"'/bin/sh -c echo .*' returned a non-zero code: 7") as caught:
        anyio.run(ensure_image, load_task(folder), "mol-sandbox:bookworm")
    assert "about to fail" in str(caught.value)  # the build log's tail


def folder_marker() -> str:
    import os

    return f"pid {os.getpid()}"  # a context no other test run shares
