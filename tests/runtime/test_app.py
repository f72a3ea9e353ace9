"""The composition root: what a runtime start does besides running turns."""

import signal
import sys

import anyio
import pytest

from mol.runtime import open_runtime
from mol.sandboxes import docker, owner

from .conftest import toy_plugins

pytestmark = pytest.mark.anyio

ORPHAN_MAKER = """
import anyio
from mol.sandboxes.sandbox import Sandbox

async def main():
    async with Sandbox(session_id="runtime-start-gc") as box:
        print(box.id, flush=True)
        await anyio.sleep(600)

anyio.run(main)
"""


async def sandbox_ids() -> set[str]:
    found = await docker.call(docker.list_containers, owner.LABEL, what="list sandboxes")
    return {info["Id"] for info in found}


@pytest.mark.docker
async def test_a_runtime_start_removes_sandboxes_of_a_killed_runtime(hcp):
    process = await anyio.open_process([sys.executable, "-c", ORPHAN_MAKER])
    try:
        with anyio.fail_after(90):
            line = b""
            async for chunk in process.stdout:
                line += chunk
                if line.endswith(b"\n"):
                    break
    finally:
        process.send_signal(signal.SIGKILL)
        await process.wait()
        await process.aclose()
    orphan = line.decode().strip()
    assert orphan in await sandbox_ids()
    async with open_runtime(hcp, plugins=toy_plugins()):
        pass  # the start's background collection finishes before the runtime closes
    assert orphan not in await sandbox_ids()


async def test_errors_of_the_callers_block_come_out_unwrapped(hcp):
    from mol.core.errors import EngineTimeout

    with pytest.raises(EngineTimeout, match="too slow") as info:
        async with open_runtime(hcp, plugins=toy_plugins()):
            try:
                raise TimeoutError("the cause")
            except TimeoutError as cause:
                raise EngineTimeout("too slow") from cause
    assert isinstance(info.value.__cause__, TimeoutError)


@pytest.mark.docker
async def test_pool_size_makes_the_runtime_serve_sessions_from_a_warm_pool(tmp_path):
    from mol.hcp.loader import load
    from mol.plugins.manager import PluginManager
    from mol.runtime.testing import ScriptedEngine

    from .conftest import write_hcp

    write_hcp(tmp_path, extra='[sandbox]\npool_size = 1\ntmp_size = "64m"\n')
    path = tmp_path / "test.toml"
    path.write_text(path.read_text().replace('tools.allow = ["echo", "add"]',
                                             'tools.allow = ["terminal"]'))
    script = """
[[L0]]
constrained = true
reply = "L1"
[[L1]]
tool_calls = [{ name = "terminal", arguments = { command = "echo warm" } }]
[[L1]]
when = "warm"
reply = "done"
[[L0]]
constrained = false
times = -1
reply = "summary"
"""
    plugins = PluginManager(load=[], builtin=["mol.plugins.builtin.sandbox"])
    with anyio.fail_after(180):
        async with ScriptedEngine.serve(script) as engine, open_runtime(
                load(path), engine_url=engine.base_url, plugins=plugins) as runtime, \
                runtime.session() as harness:
            pool = runtime.sandbox_pool
            assert pool is not None and pool.size == 1
            await pool.wait_ready()
            warm = pool._ready[0].id
            assert (await harness.turn("run it")).answer == "done"
            assert harness.resources.peek("sandbox").id == warm  # taken warm, not started cold
            await pool.wait_ready()  # refilled behind the taken one
            refill = pool._ready[0].id
    # The session's sandbox and the pool's refill both ended with the runtime.
    assert not {warm, refill} & await sandbox_ids()
