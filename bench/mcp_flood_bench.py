"""Benchmark: ``/health`` latency of ``mol serve`` while a hostile MCP server floods it.

The worst case of issue 14 item 1, sustained: the stdio server
(``tests/runtime/mcp/servers/hostile_server.py --flood``) writes, over and
over, a 15.9 MiB answer of 640k empty content blocks, then twenty log
notifications of 5000 objects each, as fast as mol reads them. The baseline
is the same ``mol serve`` with the same server, not flooding, measured in the
same run (rounds alternate, so machine load hits both alike). Before the fix
one such answer stalled the event loop for 22 s.

    python bench/mcp_flood_bench.py [--rounds 3] [--probes 100]

Target: the flood's median ``/health`` latency at most 1.5x the quiet one and
its 95th percentile at most 2x (``/health`` itself probes the engine, about
0.1-0.2 s here). Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = ROOT / "tests" / "runtime" / "mcp" / "servers" / "hostile_server.py"


def _artifact(folder: Path, flood: bool) -> Path:
    path = folder / ("flood.toml" if flood else "quiet.toml")
    args = [str(HOSTILE), "--flood"] if flood else [str(HOSTILE)]
    path.write_text(f"""schema_version = 1
name = "flood-bench"
[router]
prompt = "route"
[adapters.L1]
mcp_servers = ["h"]
[mcp_servers.h]
command = "{sys.executable}"
args = {json.dumps(args)}
startup_timeout_sec = 60
""")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _probe(url: str, probes: int) -> list[float]:
    """Latencies of ``probes`` sequential ``GET /health`` (20 ms apart)."""
    out = []
    async with httpx.AsyncClient(timeout=60) as client:
        for _ in range(probes):
            started = time.perf_counter()
            answer = await client.get(url)
            out.append(time.perf_counter() - started)
            assert answer.status_code in (200, 503), answer.status_code
            await anyio.sleep(0.02)
    return out


async def _measure(hcp: Path, engine_url: str, probes: int) -> list[float]:
    port = _free_port()
    env = {**os.environ, "MOL_ALLOW_UNAUTHENTICATED": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    command = [sys.executable, "-m", "mol.cli", "serve", "--hcp", str(hcp), "--port", str(port),
               "--engine-url", engine_url]
    process = await anyio.open_process(command, env=env, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/health"
    try:
        async with httpx.AsyncClient(timeout=5) as client:
            with anyio.fail_after(120):
                while True:
                    try:
                        answer = await client.get(url)
                        if answer.json()["mcp_servers"][0]["state"] == "ready":
                            break
                    except (httpx.HTTPError, KeyError, IndexError, ValueError):
                        pass
                    await anyio.sleep(0.2)
        await anyio.sleep(2.0)  # let the flood get going
        return await _probe(url, probes)
    finally:
        process.terminate()
        with anyio.move_on_after(20):
            await process.wait()
        if process.returncode is None:
            process.kill()
        await process.aclose()


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"median_ms": round(statistics.median(ordered) * 1000, 2),
            "p95_ms": round(ordered[int(len(ordered) * 0.95) - 1] * 1000, 2),
            "max_ms": round(ordered[-1] * 1000, 2)}


async def main(rounds: int, probes: int) -> dict[str, object]:
    from mol.runtime.testing import ScriptedEngine

    quiet: list[float] = []
    flood: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        async with ScriptedEngine.serve({"L0": [{"reply": "L1", "times": -1}]}) as engine:
            for _ in range(rounds):
                quiet += await _measure(_artifact(folder, False), engine.base_url, probes)
                flood += await _measure(_artifact(folder, True), engine.base_url, probes)
    q, f = _summary(quiet), _summary(flood)
    ratio = round(f["median_ms"] / q["median_ms"], 2)
    tail = round(f["p95_ms"] / q["p95_ms"], 2)
    return {"bench": "mcp_flood_health", "quiet": q, "flood": f, "median_ratio": ratio,
            "p95_ratio": tail, "target": "median ratio <= 1.5 and p95 ratio <= 2",
            "met": ratio <= 1.5 and tail <= 2, "probes": len(quiet)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--probes", type=int, default=100)
    options = parser.parse_args()
    print(json.dumps(anyio.run(main, options.rounds, options.probes)))
