"""Hostile commands are contained and reported, and the runtime's own memory stays flat."""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable
from pathlib import Path

import anyio
import pytest

from mol.hcp.schema import SandboxConfig
from mol.sandboxes import docker
from mol.sandboxes.result import CommandResult
from mol.sandboxes.sandbox import Sandbox
from mol.sandboxes.shell import MAX_GRACE

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

PAGE = 4096


def rss() -> int:
    """This process's resident memory in bytes, now."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * PAGE


async def watching_memory(work: Awaitable[CommandResult]) -> tuple[CommandResult, int]:
    """Run ``work`` while sampling our RSS; returns its result and the largest growth seen."""
    baseline, peak = rss(), 0
    result: list[CommandResult] = []

    async def run() -> None:
        result.append(await work)
        group.cancel_scope.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        while True:
            peak = max(peak, rss() - baseline)
            await anyio.sleep(0.02)
    return result[0], peak


async def test_fork_bomb_is_contained_and_reported(small_sandbox: Sandbox) -> None:
    sandbox = small_sandbox
    await sandbox.run("cd /tmp && export SURVIVES=yes")
    with anyio.fail_after(60):
        probe, growth = await watching_memory(sandbox.run(":(){ :|:& };:", timeout=10))
        # The bomb forks on in the background; a command finds the sandbox at its process
        # limit: a timeout or the process-count check sweeps the bomb away. On a busy
        # machine that can be the bomb's own command, whose end checks the count.
        while not (probe.timed_out or probe.process_limit_kills):
            probe = await sandbox.run("sleep 0.1", timeout=5)
    assert "Timed out" in probe.render() or "process limit" in probe.render()
    assert growth < 32 << 20
    # (Messages the bomb wrote just before it died may still arrive first.)
    count = await sandbox.run('echo "processes=$(ps -e --no-headers | wc -l)"')
    said = re.findall(r"^processes=(\d+)$", count.output, re.MULTILINE)
    assert said and int(said[-1]) < 10, count
    state = await sandbox.run('pwd; echo "$SURVIVES"')
    if probe.shell_exited or count.fresh_shell:
        # bash gives up after its fork retries and exits: said so, and replaced.
        assert "fresh shell" in count.render() and state.output.endswith("/workspace\n\n")
    else:
        assert state.output.endswith("/tmp\nyes\n")


async def test_memory_bomb_is_killed_and_reported(small_sandbox: Sandbox) -> None:
    command = "python3 -c 'b = []\nwhile True: b.append(bytearray(16 << 20))'"
    result, growth = await watching_memory(small_sandbox.run(command, timeout=60))
    assert result.exit_code == 137 and not result.timed_out
    assert "killed by signal 9 (out of memory?)" in result.render()
    assert growth < 32 << 20
    assert (await small_sandbox.run("echo fine")).output.endswith("fine\n")


@pytest.mark.parametrize("folder", ["/tmp", "/workspace"])
async def test_disk_fill_stops_at_the_cap(small_sandbox: Sandbox, folder: str) -> None:
    result = await small_sandbox.run(f"dd if=/dev/zero of={folder}/fill bs=1M", timeout=60)
    assert result.exit_code == 1 and "No space left on device" in result.output
    size = await small_sandbox.run(f"du -m {folder}/fill | cut -f1; rm {folder}/fill")
    assert int(size.output.split()[-1]) <= 32
    after = await small_sandbox.run(f"echo ok > {folder}/after && cat {folder}/after")
    assert after.output.endswith("ok\n")


async def test_a_gigabyte_without_newlines_is_capped_in_bounded_memory(
        small_sandbox: Sandbox) -> None:
    with anyio.fail_after(120):
        result, growth = await watching_memory(
            small_sandbox.run("head -c 1G /dev/zero", timeout=110))
    assert result.exit_code == 0 and not result.timed_out
    assert result.total_bytes == 1 << 30
    assert result.dropped_bytes == (1 << 30) - 4096
    assert len(result.output) < 4 * 4096 + 200  # NULs shown as \x00 escapes
    assert result.output.startswith("\\x00\\x00") and "bytes dropped" in result.output
    assert growth < 32 << 20, f"RSS grew by {growth >> 20} MiB"


PYTHON_FORK_BOMBS = {
    "dies": "python3 -c 'import os\nwhile 1: os.fork()'",
    "persists": "python3 -c 'import os\nwhile 1:\n try: os.fork()\n except OSError: pass'",
}
"""Fork as fast as Python can (the first dies when a fork fails, so its command may end
while its children fork on): they starved the control shell, which shared their CPU quota."""


async def cpu_seconds(sandbox: Sandbox) -> float:
    """CPU time the sandbox's container has used so far, from the Docker engine."""
    stats = await docker.call(docker.client().api.stats, sandbox.id, stream=False,
                              what="read the sandbox's CPU counter")
    return stats["cpu_stats"]["cpu_usage"]["total_usage"] / 1e9


@pytest.mark.slow
@pytest.mark.parametrize("bomb", sorted(PYTHON_FORK_BOMBS))
async def test_a_python_fork_bomb_ends_within_timeout_and_grace_and_its_cpu_use_stops(
        bomb: str) -> None:
    async with Sandbox(SandboxConfig(), session_id="test-python-bomb") as sandbox:
        await sandbox.run("cd /tmp && export SURVIVES=yes")
        started = time.monotonic()
        with anyio.fail_after(90):
            result = await sandbox.run(PYTHON_FORK_BOMBS[bomb], timeout=5)
        elapsed = time.monotonic() - started
        assert elapsed < 5 + MAX_GRACE + 3, (elapsed, result)
        # (The first bomb may burn itself out: each of its processes dies at a failed fork.)
        assert result.timed_out or bomb == "dies", result
        # Nothing of the bomb runs on: within a few seconds (its sweep may still be ending
        # on a loaded machine), a two-second window uses almost no CPU.
        used = []
        for _ in range(5):
            before = await cpu_seconds(sandbox)
            await anyio.sleep(2)
            used.append(await cpu_seconds(sandbox) - before)
            if used[-1] < 0.3:
                break
        assert used[-1] < 0.3, used
        with anyio.fail_after(30):
            after = await sandbox.run('echo "count=$(ps -e --no-headers | wc -l)"; '
                                      'echo "where=$(pwd)"; echo "survives=$SURVIVES"',
                                      timeout=10)
        # (A fresh sandbox has no $SURVIVES: name each value rather than count words.)
        said = dict(line.split("=", 1) for line in after.output.splitlines() if "=" in line)
        count, where, survives = said["count"], said["where"], said["survives"]
        assert int(count) < 10 and after.exit_code == 0, after
        # The sandbox is still usable: the same one, or a fresh one that says so.
        if after.fresh_sandbox:
            assert "fresh sandbox" in after.render()
        else:
            assert (where, survives) == ("/tmp", "yes")


async def test_a_sandbox_that_stops_answering_is_killed_and_replaced_on_next_use() -> None:
    async with Sandbox(SandboxConfig(), session_id="test-replaced") as sandbox:
        await sandbox.write_file("kept.txt", b"x")
        first = sandbox.id
        assert sandbox._control is not None
        # Freeze the control shell, as starving it did: only the Docker engine can, as root.
        await docker.call(docker.exec_run, first, ["kill", "-STOP", str(sandbox._control.pid)],
                          user="0", what="freeze the control shell")
        started = time.monotonic()
        result = await sandbox.run("sleep 1000", timeout=1)
        assert time.monotonic() - started < 1 + MAX_GRACE + 2
        assert result.timed_out and result.exit_code is None and result.shell_exited
        assert "stopped answering and was killed" in result.render()
        state = await docker.call(docker.container_state, first, what="inspect the sandbox")
        assert not state["Running"]  # killed from outside: nothing in it runs on
        after = await sandbox.run("echo fresh; ls")
        assert after.fresh_sandbox and after.output == "fresh\n", after
        assert "A fresh sandbox was started" in after.render() and sandbox.id != first
    assert first not in {c["Id"] for c in await docker.call(
        docker.list_containers, "org.mol.sandbox", what="list sandboxes")}
