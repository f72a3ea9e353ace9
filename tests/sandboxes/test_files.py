"""Files travel through the shell (small ones) or as tar archives over the Docker API,
confined to the workspace."""

from __future__ import annotations

import os

import anyio
import pytest

from mol.core.errors import PathEscape, SandboxError
from mol.sandboxes import docker
from mol.sandboxes.sandbox import Sandbox

pytestmark = [pytest.mark.docker, pytest.mark.anyio]


async def test_binary_files_round_trip_exactly(sandbox: Sandbox) -> None:
    data = bytes(range(256)) * 4 + os.urandom(1 << 20)
    where = await sandbox.write_file("bin/blob.dat", data)
    assert where == "/workspace/bin/blob.dat"
    assert await sandbox.read_file("/workspace/bin/blob.dat") == data
    check = await sandbox.run("sha256sum bin/blob.dat | cut -d' ' -f1; stat -c '%U %s' "
                              "bin/blob.dat bin")
    import hashlib

    assert check.output == (f"{hashlib.sha256(data).hexdigest()}\nmol {len(data)}\nmol 60\n")


async def test_written_files_belong_to_the_user_and_can_be_edited_by_the_shell(
        sandbox: Sandbox) -> None:
    await sandbox.write_file("notes/a.txt", b"one\n")
    result = await sandbox.run("echo two >> notes/a.txt && cat notes/a.txt")
    assert result.output == "one\ntwo\n"
    await sandbox.run("chmod 700 notes/a.txt")
    await sandbox.write_file("notes/a.txt", b"three\n")  # overwriting keeps the mode
    assert (await sandbox.run("stat -c %a notes/a.txt; cat notes/a.txt")).output == "700\nthree\n"
    await sandbox.write_file("notes/run.sh", b"#!/bin/sh\necho ran\n", mode=0o755)
    assert (await sandbox.run("./notes/run.sh")).output == "ran\n"


async def test_small_files_go_through_the_shell_and_leave_its_status(
        sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("Docker's archive API was used")

    monkeypatch.setattr(docker, "put_archive", refused)
    monkeypatch.setattr(docker, "get_archive", refused)
    data = bytes(range(256)) * 8
    await sandbox.run("cd /tmp; (exit 7)")
    assert await sandbox.write_file("via/shell.bin", data) == "/workspace/via/shell.bin"
    assert await sandbox.read_file("via/shell.bin") == data
    status = await sandbox.run("echo $? $PWD; stat -c '%a %U' /workspace/via "
                               "/workspace/via/shell.bin; cd /workspace")  # (a shared sandbox)
    assert status.output == "7 /tmp\n755 mol\n644 mol\n"


async def test_the_archive_api_serves_what_the_shell_cannot(sandbox: Sandbox) -> None:
    await sandbox.write_file("locked.txt", b"secret\n")
    await sandbox.run("chmod 000 locked.txt")
    assert await sandbox.read_file("locked.txt") == b"secret\n"  # root reads it via Docker
    await sandbox.write_file("locked.txt", b"new\n")  # the user may not write it: Docker may
    assert (await sandbox.run("stat -c %a locked.txt")).output == "0\n"
    ended: list[bool] = []

    async def busy() -> None:
        await sandbox.run("sleep 6")
        ended.append(True)

    async with anyio.create_task_group() as group:
        group.start_soon(busy)
        with anyio.fail_after(10):  # until the command holds the shell (no event says so)
            while not sandbox._lock.locked():  # noqa: ASYNC110
                await anyio.sleep(0.01)
        # The shell is busy with a command: the write goes through Docker, not after it.
        await sandbox.write_file("during.txt", b"x")
        assert await sandbox.read_file("during.txt") == b"x" and not ended


@pytest.mark.parametrize("path", ["../etc/passwd", "/etc/passwd", "a/../../etc/passwd",
                                  "/workspace/../etc/hostname", "/tmp/x"])
async def test_paths_outside_the_workspace_are_refused(sandbox: Sandbox, path: str) -> None:
    with pytest.raises(PathEscape):
        await sandbox.read_file(path)
    with pytest.raises(PathEscape):
        await sandbox.write_file(path, b"x")


async def test_symlinks_leading_outside_are_refused_both_ways(sandbox: Sandbox) -> None:
    await sandbox.run("mkdir -p links && cd links && ln -sfn /etc etc && "
                      "ln -sf /etc/passwd passwd && ln -sfn /tmp tmp && ln -sfn .. up; cd ..")
    for path in ["links/etc/passwd", "links/passwd", "links/up/../etc", "links/up/x"]:
        with pytest.raises((PathEscape, SandboxError)):
            await sandbox.read_file(path)
    for path in ["links/etc/evil", "links/passwd", "links/tmp/evil"]:
        with pytest.raises(PathEscape):
            await sandbox.write_file(path, b"x")
    assert (await sandbox.run("ls /tmp/evil 2>&1; head -1 /etc/passwd")).output.endswith(
        "No such file or directory\nroot:x:0:0:root:/root:/bin/bash\n")


async def test_symlinks_inside_the_workspace_are_followed(sandbox: Sandbox) -> None:
    await sandbox.write_file("real/file.txt", b"real\n")
    await sandbox.run("ln -sfn real alias && ln -sf real/file.txt link.txt")
    assert await sandbox.read_file("alias/file.txt") == b"real\n"
    assert await sandbox.read_file("link.txt") == b"real\n"
    await sandbox.write_file("link.txt", b"changed\n")
    assert (await sandbox.run("cat real/file.txt; test -L link.txt && echo still-a-link")).output \
        == "changed\nstill-a-link\n"


async def test_missing_files_and_folders_are_clear_errors(sandbox: Sandbox) -> None:
    with pytest.raises(SandboxError, match="no such file"):
        await sandbox.read_file("nope.txt")
    await sandbox.run("mkdir -p adir")
    with pytest.raises(SandboxError, match="a directory"):
        await sandbox.read_file("adir")
    with pytest.raises(SandboxError, match="is a directory"):
        await sandbox.write_file("adir", b"x")
    await sandbox.write_file("plain", b"x")
    with pytest.raises(SandboxError, match="not a directory"):
        await sandbox.write_file("plain/child", b"x")


async def test_list_dir(sandbox: Sandbox) -> None:
    await sandbox.write_file("listing/one.txt", b"1")
    await sandbox.write_file("listing/sub/two.txt", b"22")
    listing = await sandbox.list_dir("listing")
    names = [line.split()[-1] for line in listing.output.splitlines()[1:]]
    assert names == [".", "..", "sub", "one.txt"]
    with pytest.raises(PathEscape):
        await sandbox.list_dir("..")
