"""Ownership and cleanup: orphans of a killed runtime, concurrency, warm pools, the CLI."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import tarfile
import time

import anyio
import pytest

from mol.core.errors import SandboxError
from mol.hcp.schema import SandboxConfig
from mol.sandboxes import docker, owner
from mol.sandboxes.pool import SandboxPool
from mol.sandboxes.sandbox import Sandbox, open_sandbox

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

MOL = [sys.executable, "-m", "mol.cli"]

ORPHAN_MAKER = """
import anyio
from mol.sandboxes.sandbox import Sandbox

async def main():
    async with Sandbox(session_id="orphan-test") as a, Sandbox(session_id="orphan-test") as b:
        print(a.id, b.id, flush=True)
        await anyio.sleep(600)

anyio.run(main)
"""


async def container_ids() -> set[str]:
    found = await docker.call(docker.list_containers, owner.LABEL, what="list sandboxes")
    return {info["Id"] for info in found}


async def test_containers_of_a_killed_runtime_are_removed_by_gc(sandbox: Sandbox) -> None:
    process = await anyio.open_process([sys.executable, "-c", ORPHAN_MAKER])
    try:
        with anyio.fail_after(60):
            assert process.stdout is not None
            line = b""
            async for chunk in process.stdout:
                line += chunk
                if line.endswith(b"\n"):
                    break
        orphans = set(line.decode().split())
        assert len(orphans) == 2
    finally:
        process.send_signal(signal.SIGKILL)
        await process.wait()
    assert orphans <= await container_ids()  # SIGKILL left them behind
    with anyio.fail_after(120):
        gc = await anyio.run_process([*MOL, "sandbox", "gc"], check=False)
    assert gc.returncode == 0, gc.stderr
    removed = gc.stdout.decode().split()
    assert {f"{orphan[:12]}" for orphan in orphans} <= set(removed)
    remaining = await container_ids()
    assert not orphans & remaining
    assert sandbox.id in remaining  # a live runtime's sandbox is left alone
    assert (await sandbox.run("echo alive")).output == "alive\n"


PROBE_KILLED = """
import sys, time
import anyio
from mol.hcp.schema import SandboxConfig
from mol.sandboxes import docker, users

def stuck(*args, **kwargs):
    print("reading", flush=True)
    time.sleep(600)

async def main():
    image = await docker.call(docker.inspect_image, sys.argv[1], what="inspect")
    await users.resolve_user(SandboxConfig(user="mol"), image)  # reads its /etc/passwd

docker.get_archive = stuck
anyio.run(main)
"""


async def test_an_image_probe_left_by_a_killed_runtime_is_removed_by_gc() -> None:
    # Reading an image's files makes a never-started container; a runtime killed meanwhile
    # leaves it behind, and only its labels let the next runtime know it is an orphan.
    image = SandboxConfig().image
    process = await anyio.open_process([sys.executable, "-c", PROBE_KILLED, image])
    try:
        with anyio.fail_after(60):
            assert process.stdout is not None
            assert b"reading" in await process.stdout.receive()
    finally:
        process.send_signal(signal.SIGKILL)
        await process.wait()
    found = await docker.call(docker.list_containers, owner.LABEL, what="list sandboxes")
    left = [info["Id"] for info in found if info["Labels"][owner.LABEL] == "probe"
            and f"/{process.pid}/" in info["Labels"][owner.OWNER]]
    assert len(left) == 1
    assert left[0] in await owner.gc_orphans()
    assert left[0] not in await container_ids()


def test_owner_labels_identify_live_and_dead_processes() -> None:
    me = owner.current()
    assert me.alive() is True and owner.Owner.parse(me.label()) == me
    recycled = owner.Owner(me.host, me.boot, me.pid, me.start + 1)  # same pid, other process
    assert recycled.alive() is False
    assert owner.Owner(me.host, "another-boot", me.pid, me.start).alive() is False
    assert owner.Owner("elsewhere", me.boot, me.pid, me.start).alive() is None
    assert owner.Owner.parse("garbage") is None


async def test_eight_sandboxes_used_concurrently_from_one_process() -> None:
    results: dict[int, str] = {}
    ids: set[str] = set()

    async def use(index: int) -> None:
        async with open_sandbox(SandboxConfig(), session_id=f"test-eight-{index}") as sandbox:
            ids.add(sandbox.id)
            await sandbox.write_file("me.txt", f"{index}\n".encode())
            result = await sandbox.run("sleep 1; cat me.txt; echo $((6 * 7))", timeout=30)
            results[index] = result.output

    with anyio.fail_after(120):
        async with anyio.create_task_group() as group:
            for index in range(8):
                group.start_soon(use, index)
    assert results == {index: f"{index}\n42\n" for index in range(8)}
    assert len(ids) == 8 and not ids & await container_ids()


async def test_warm_pool_hands_out_ready_sandboxes_and_refills() -> None:
    config = SandboxConfig(pool_size=2, tmp_size="64m")
    with anyio.fail_after(120):
        async with SandboxPool(config) as pool:
            await pool.wait_ready()
            started = time.monotonic()
            async with open_sandbox(config, session_id="ignored", pool=pool) as sandbox:
                taken = time.monotonic() - started
                assert pool.ready == 1
                assert (await sandbox.run("echo warm")).output == "warm\n"
                taken_id = sandbox.id
            assert taken < 1.0  # no container was started for it (the benchmark measures)
            await pool.wait_ready()
            waiting = [s.id for s in pool._ready]
    remaining = await container_ids()
    assert taken_id not in remaining and not set(waiting) & remaining


async def test_a_sandbox_taken_from_the_pool_belongs_to_its_session() -> None:
    config = SandboxConfig(pool_size=1, tmp_size="64m")
    with anyio.fail_after(120):
        async with SandboxPool(config) as pool:
            await pool.wait_ready()
            waiting = await sandbox_names()
            assert owner.session_of(waiting[pool._ready[0].id]) is None  # nobody's yet
            async with open_sandbox(config, session_id="test-pool-owner", pool=pool) as taken:
                names = await sandbox_names()
                assert owner.session_of(names[taken.id]) == "test-pool-owner"
                assert taken.session_id == "test-pool-owner"


async def sandbox_names() -> dict[str, str]:
    found = await docker.call(docker.list_containers, owner.LABEL, what="list sandboxes")
    return {info["Id"]: info["Names"][0] for info in found}


async def test_close_waits_for_the_running_command() -> None:
    sandbox = Sandbox(session_id="test-close-waits")
    await sandbox.start()
    results = []

    async def command() -> None:
        results.append(await sandbox.run("sleep 1; echo finished", timeout=30))

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            group.start_soon(command)
            await anyio.sleep(0.3)
            await sandbox.close()  # must not pull the container from under the command
    assert results[0].output == "finished\n" and results[0].exit_code == 0, results
    assert not sandbox.id


def test_cli_run_streams_output_and_exits_with_the_commands_code() -> None:
    done = subprocess.run([*MOL, "sandbox", "run", "--", "sh", "-c", "echo out; echo err >&2; "
                          "exit 3"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 3 and done.stdout == "out\nerr\n"
    timed = subprocess.run([*MOL, "sandbox", "run", "--timeout", "1", "--", "sleep 30"],
                           capture_output=True, text=True, timeout=120)
    assert timed.returncode == 124 and "Timed out after 1 s" in timed.stderr


def test_cli_without_a_docker_engine_is_a_clear_error() -> None:
    env = {**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock"}
    for command in (["run", "--", "true"], ["gc"]):
        done = subprocess.run([*MOL, "sandbox", *command], capture_output=True, text=True,
                              env=env, timeout=60)
        assert done.returncode == 1
        assert done.stderr.startswith("error: no Docker engine answers at "
                                      "unix:///nonexistent/docker.sock")
        assert "Traceback" not in done.stderr


def test_cli_shell_keeps_state_and_exit_ends_the_session() -> None:
    done = subprocess.run([*MOL, "sandbox", "shell"], input="cd /tmp\npwd\nexit 3\necho never\n",
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    assert "/tmp\n" in done.stdout and "never" not in done.stdout


def test_cli_usage_errors_exit_2() -> None:
    done = subprocess.run([*MOL, "sandbox", "run"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "give the command after '--'" in done.stderr


async def test_a_missing_image_says_how_to_build_it() -> None:
    with pytest.raises(SandboxError, match="mol sandbox image build"):
        async with open_sandbox(SandboxConfig(image="mol-no-such-image:1")):
            pass


async def test_an_image_without_bash_is_a_clear_error() -> None:
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        info = tarfile.TarInfo("etc/passwd")
        data = b"root:x:0:0:root:/root:/bin/sh\n"
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    tag = "mol-test-no-bash:1"
    await docker.call(docker.import_image, [archive.getvalue()], tag, [], what="import")
    with pytest.raises(SandboxError, match="bash"):
        async with open_sandbox(SandboxConfig(image=tag)):
            pass
    found = await docker.call(docker.list_containers, owner.LABEL, what="list sandboxes")
    assert [i["Id"] for i in found if i["Image"] == tag] == []  # the failed one was removed
    await docker.call(docker.client().api.remove_image, tag, what="remove the test image")
