"""Benchmark: the persistent shell against per-command ``docker exec``; cold start against a warm pool.

Run: ``python bench/sandbox_bench.py [--rounds N]`` (needs the Docker engine and
the default image). In one run it measures, on the same sandbox and the same
command (``true``):

- round trip through the persistent shell (``Sandbox.run``): back to back, and with
  ``PAUSE`` seconds of idleness before each command, as an agent uses it (each command
  runs in its own process as the sandbox user, started as soon as the previous one
  ended); and Docker's relay alone (a bare bash echoing over an exec socket) to tell
  our own overhead;
- ``docker exec`` through the CLI (what mini-swe-agent does per command);
- the Docker SDK's ``exec_run``;

and then a cold sandbox start (create, start, shells answering) against taking
one from a warm pool (``open_sandbox(..., pool=pool)``).
It prints medians and ratios and ends with one JSON line of the figures.
Targets: a paused round trip at least x10 below ``docker exec``, warm acquire (a
container rename) <= 20 ms, cold ready <= 300 ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable

import anyio

from mol.hcp.schema import SandboxConfig
from mol.sandboxes import docker
from mol.sandboxes.pool import SandboxPool
from mol.sandboxes.sandbox import Sandbox, open_sandbox
from mol.sandboxes.stream import MuxSocket


async def timed(action: Callable[[], Awaitable[object]], rounds: int,
                pause: float = 0.0) -> list[float]:
    """Milliseconds each of ``rounds`` awaits of ``action`` took (``pause`` seconds of
    idleness before each, untimed)."""
    samples = []
    for _ in range(rounds):
        if pause:
            await anyio.sleep(pause)
        started = time.perf_counter()
        await action()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


PAUSE = 0.05
"""Seconds between two commands in the paused round trips (a model's think time is more)."""


async def relay_floor(sandbox: Sandbox, rounds: int) -> list[float]:
    """Docker's own relay: a bare bash echoing over an exec socket, no protocol of ours."""
    sock = MuxSocket(await docker.call(
        docker.exec_socket, sandbox.id, ["bash", "--noprofile", "--norc"], what="exec bash",
        user=f"{sandbox.uid}:{sandbox.gid}", workdir=sandbox.workspace, environment={}))

    async def echo() -> None:
        await sock.send(b"echo\n")
        await sock.receive()

    try:
        await timed(echo, 50)
        return await timed(echo, rounds)
    finally:
        sock.close()


async def round_trips(rounds: int) -> dict[str, float]:
    async with Sandbox(SandboxConfig(), session_id="bench") as sandbox:
        await timed(lambda: sandbox.run("true"), 50)  # warm up
        shell = await timed(lambda: sandbox.run("true"), rounds)
        # As an agent uses it: the model thinks between two commands.
        paused = await timed(lambda: sandbox.run("true"), max(50, rounds // 5), PAUSE)
        floor = await relay_floor(sandbox, rounds)

        def cli() -> None:
            subprocess.run(["docker", "exec", sandbox.id, "true"], check=True)

        exec_rounds = max(10, rounds // 50)
        docker_cli = await timed(lambda: anyio.to_thread.run_sync(cli), exec_rounds)
        sdk = await timed(lambda: docker.call(docker.exec_run, sandbox.id, ["true"],
                                              what="exec_run"), exec_rounds)
    return {"shell_ms": statistics.median(shell), "shell_paused_ms": statistics.median(paused),
            "relay_floor_ms": statistics.median(floor),
            "own_overhead_ms": statistics.median(shell) - statistics.median(floor),
            "docker_exec_cli_ms": statistics.median(docker_cli),
            "sdk_exec_run_ms": statistics.median(sdk)}


async def starts(rounds: int) -> dict[str, float]:
    config = SandboxConfig()
    cold = []
    for _ in range(rounds):
        sandbox = Sandbox(config, session_id="bench")
        started = time.perf_counter()
        await sandbox.start()
        cold.append((time.perf_counter() - started) * 1000)
        await sandbox.close()
    warm = []
    async with SandboxPool(config, size=rounds) as pool:
        with anyio.fail_after(300):
            await pool.wait_ready()
        for _ in range(rounds):
            started = time.perf_counter()
            async with open_sandbox(config, pool=pool) as sandbox:
                warm.append((time.perf_counter() - started) * 1000)
                await sandbox.run("true")
    return {"cold_start_ms": statistics.median(cold), "warm_acquire_ms": statistics.median(warm)}


async def main(rounds: int, starts_rounds: int) -> dict[str, float]:
    figures = await round_trips(rounds)
    figures |= await starts(starts_rounds)
    figures["cli_vs_shell"] = figures["docker_exec_cli_ms"] / figures["shell_ms"]
    figures["cli_vs_paused_shell"] = figures["docker_exec_cli_ms"] / figures["shell_paused_ms"]
    figures["exec_run_vs_shell"] = figures["sdk_exec_run_ms"] / figures["shell_ms"]
    figures["cold_vs_warm"] = figures["cold_start_ms"] / figures["warm_acquire_ms"]
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1000, help="shell round trips to time")
    parser.add_argument("--starts", type=int, default=5, help="cold starts and warm acquires")
    args = parser.parse_args()
    result = anyio.run(main, args.rounds, args.starts)
    print(f"round trip, persistent shell   {result['shell_ms']:8.3f} ms (median)", file=sys.stderr)
    print(f"  after {PAUSE * 1000:g} ms idle            {result['shell_paused_ms']:8.3f} ms",
          file=sys.stderr)
    print(f"  Docker's relay alone (bash echo) {result['relay_floor_ms']:6.3f} ms; "
          f"our own overhead {result['own_overhead_ms']:.3f} ms", file=sys.stderr)
    print(f"round trip, docker exec (CLI)  {result['docker_exec_cli_ms']:8.1f} ms  "
          f"x{result['cli_vs_shell']:.0f}", file=sys.stderr)
    print(f"round trip, SDK exec_run       {result['sdk_exec_run_ms']:8.1f} ms  "
          f"x{result['exec_run_vs_shell']:.0f}", file=sys.stderr)
    print(f"cold sandbox start (ready)     {result['cold_start_ms']:8.1f} ms", file=sys.stderr)
    print(f"warm pool acquire              {result['warm_acquire_ms']:8.3f} ms  "
          f"(cold is x{result['cold_vs_warm']:.0f})", file=sys.stderr)
    print(json.dumps({key: round(value, 4) for key, value in result.items()}))
