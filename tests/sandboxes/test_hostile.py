"""Hostile commands are contained and reported, and the runtime's own memory stays flat."""

from __future__ import annotations

from collections.abc import Awaitable
from pathlib import Path

import anyio
import pytest

from mol.sandboxes.sandbox import Sandbox
from mol.sandboxes.shell import CommandResult

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
        _, growth = await watching_memory(sandbox.run(":(){ :|:& };:", timeout=10))
        # The bomb forks on in the background; the next commands find the sandbox at its
        # process limit: a timeout or the process-count check sweeps the bomb away.
        while True:
            probe = await sandbox.run("sleep 0.1", timeout=5)
            if probe.timed_out or probe.process_limit_kills:
                break
    assert "Timed out" in probe.render() or "process limit" in probe.render()
    assert growth < 32 << 20
    # (Messages the bomb wrote just before it died may still arrive first.)
    count = await sandbox.run("echo; ps -e --no-headers | wc -l")
    assert int(count.output.split()[-1]) < 10, count
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
