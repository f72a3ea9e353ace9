"""Extra writable folders, a workspace seeded from the image, and uploads into them."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from mol.core.errors import PathEscape
from mol.hcp.schema import SandboxConfig
from mol.sandboxes import docker
from mol.sandboxes.sandbox import Sandbox

pytestmark = [pytest.mark.docker, pytest.mark.anyio]


@pytest.fixture(scope="module")
def seeded_image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An image holding files (one root-owned and read-only) in /workspace."""
    context = tmp_path_factory.mktemp("context")
    (context / "Dockerfile").write_text(
        "FROM mol-sandbox:bookworm\nCOPY files/ /workspace/\n"
        "USER root\nRUN chmod 0444 /workspace/readonly.txt && ln -s notes.txt /workspace/link\n"
        "USER 1000:1000\n")
    (context / "files" / "sub").mkdir(parents=True)
    (context / "files" / "notes.txt").write_text("from the image\n")
    (context / "files" / "readonly.txt").write_text("keep\n")
    (context / "files" / "sub" / "run.sh").write_text("echo ran\n")
    os.chmod(context / "files" / "sub" / "run.sh", 0o755)
    tag = f"mol-test-seed:{os.getpid()}"
    docker.build_image(str(context), tag)
    yield tag
    docker.client().api.remove_image(tag, force=True)


async def test_mounts_are_writable_folders_of_the_sandbox_user() -> None:
    async with Sandbox(SandboxConfig(), session_id="test-mounts",
                       mounts=("/tests", "/logs")) as sandbox:
        result = await sandbox.run("stat -c '%U %a' /tests /logs; touch /logs/x /tests/y && "
                                   "echo written; touch /etc/x 2>&1 | tail -1")
        assert result.output.splitlines() == ["mol 755", "mol 755", "written",
                                              "touch: cannot touch '/etc/x': Read-only file "
                                              "system"]


async def test_the_workspace_is_seeded_from_the_image_and_owned_by_the_user(
        seeded_image: str) -> None:
    async with Sandbox(SandboxConfig(image=seeded_image), session_id="test-seed",
                       seed=True) as sandbox:
        listing = await sandbox.run("stat -c '%n %U %a' notes.txt readonly.txt sub/run.sh; "
                                    "readlink link; cat link; ./sub/run.sh")
        assert listing.output.splitlines() == [
            "notes.txt mol 644", "readonly.txt mol 444", "sub/run.sh mol 755", "notes.txt",
            "from the image", "ran"]
        assert await sandbox.read_file("notes.txt") == b"from the image\n"
    async with Sandbox(SandboxConfig(image=seeded_image), session_id="test-unseeded") as bare:
        assert (await bare.run("ls -A | wc -l")).output.strip() == "0"


async def test_uploads_land_in_the_workspace_or_a_mount_and_nowhere_else(
        tmp_path: Path) -> None:
    async with Sandbox(SandboxConfig(), session_id="test-upload",
                       mounts=("/tests",)) as sandbox:
        await sandbox.upload("/tests", [("test.sh", b"echo hi\n", 0o755),
                                        ("data/a.txt", b"a", 0o644)])
        await sandbox.upload("/workspace/deep/er", [("b.txt", b"b", 0o600)])
        result = await sandbox.run("stat -c '%n %U %a' /tests/test.sh /tests/data/a.txt "
                                   "/workspace/deep/er/b.txt; bash /tests/test.sh")
        assert result.output.splitlines() == [
            "/tests/test.sh mol 755", "/tests/data/a.txt mol 644",
            "/workspace/deep/er/b.txt mol 600", "hi"]
        big = bytes(range(256)) * 1200  # past SHELL_UPLOAD_BYTES: goes as an archive
        await sandbox.upload("/tests", [("big.bin", big, 0o640), ("empty", b"", 0o644)])
        assert (await sandbox.run("stat -c '%s %U %a' /tests/big.bin /tests/empty; "
                                  "sha256sum < /tests/big.bin")).output.splitlines() == [
            f"{len(big)} mol 640", "0 mol 644", hashlib.sha256(big).hexdigest() + "  -"]
        await sandbox.upload("/tests", [("small.bin", big[:1000], 0o600)])
        assert (await sandbox.run("sha256sum < /tests/small.bin")).output.split()[0] == \
            hashlib.sha256(big[:1000]).hexdigest()
        # clear=True empties the folder first (dotfiles too), through the shell or not.
        await sandbox.run("touch /tests/.planted /tests/data/b.txt")
        await sandbox.upload("/tests", [("new.txt", b"n", 0o644)], clear=True)
        assert (await sandbox.run("ls -A /tests")).output == "new.txt\n"
        await sandbox.upload("/tests", [("big.bin", big, 0o640)], clear=True)
        assert (await sandbox.run("ls -A /tests")).output == "big.bin\n"
        with pytest.raises(PathEscape, match="/etc: not inside the workspace or a mount"):
            await sandbox.upload("/etc", [("x", b"", 0o644)])
        with pytest.raises(PathEscape, match="'..' is not allowed"):
            await sandbox.upload("/tests", [("../etc/x", b"", 0o644)])
