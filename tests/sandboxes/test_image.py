"""The offline image build's progress and failure reporting, and the built image's contents."""

from __future__ import annotations

import pytest

from mol.core.errors import SandboxError
from mol.sandboxes import image
from mol.sandboxes.sandbox import Sandbox

DEBOOTSTRAP_LIKE = """
echo 'I: Retrieving InRelease'
for p in $(seq 1 60); do echo "I: Retrieving pkg$p 1.0"; done
echo 'I: Unpacking required packages...'
for p in $(seq 1 30); do echo "I: Unpacking pkg$p..."; done
echo 'W: a warning'
echo 'I: Base system installed successfully.'
"""


def test_build_steps_report_stages_and_counts_not_every_package() -> None:
    lines: list[str] = []
    image._run(["sh", "-c", DEBOOTSTRAP_LIKE], lines.append)
    assert lines[0] == "Retrieving InRelease"
    assert [line for line in lines if line.startswith("retrieving packages")] == [
        "retrieving packages: 1 (pkg1)", "retrieving packages: 26 (pkg26)",
        "retrieving packages: 51 (pkg51)"]
    assert "Unpacking required packages..." in lines
    assert "unpacking packages: 26 (pkg26)" in lines
    assert "W: a warning" in lines and lines[-1] == "Base system installed successfully."
    assert len(lines) < 20


def test_a_failing_step_raises_with_its_last_lines() -> None:
    with pytest.raises(SandboxError, match=r"(?s)failed \(exit 3\).*E: no mirror"):
        image._run(["sh", "-c", "echo 'E: no mirror'; exit 3"], lambda line: None)


@pytest.mark.docker
@pytest.mark.anyio
async def test_the_default_image_has_what_the_tools_need(sandbox: Sandbox) -> None:
    tools = await sandbox.run("for t in bash python3 git ps pgrep sha256sum; do "
                              "command -v $t >/dev/null || echo missing $t; done; "
                              "getent passwd mol | cut -d: -f3,6; echo $HOME $LANG")
    assert tools.output == "1000:/home/mol\n/home/mol C.UTF-8\n"
