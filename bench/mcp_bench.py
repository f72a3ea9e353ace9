"""Benchmark: an MCP tool-call round trip through mol vs a bare ``mcp`` client session.

Both talk to the same test server program (``tests/runtime/mcp/servers/scripted_server.py``,
one process each) over stdio, in the same run. mol's path is what the harness
runs: ``run_tool`` (argument validation against the tool's JSON Schema) ->
``MCPManager`` tool -> mol's own stdio transport -> result conversion. The
baseline is ``mcp.Client(StdioServerParameters(...)).call_tool``. Calls
alternate between the two in rounds so machine load hits both alike.

    python bench/mcp_bench.py [--rounds 15] [--calls 40]

Target: mol adds at most 20% (ratio <= 1.20). Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

SERVER = (Path(__file__).resolve().parent.parent / "tests" / "runtime" / "mcp" / "servers"
          / "scripted_server.py")
ARGS = {"text": "hello from the benchmark"}


def _artifact(tmp: Path):
    from mol.hcp.loader import load_text

    text = f"""schema_version = 1
name = "bench"
[router]
prompt = "route"
[adapters.L1]
mcp_servers = ["s"]
[mcp_servers.s]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(SERVER))}]
startup_timeout_sec = 120
"""
    return load_text(text, base_dir=tmp)


async def main(rounds: int, calls: int) -> dict:
    from mcp import Client, StdioServerParameters

    from mol.core.tools import ToolContext, run_tool
    from mol.runtime.mcp import MCPManager

    mol_times: list[float] = []
    bare_times: list[float] = []
    params = StdioServerParameters(command=sys.executable, args=[str(SERVER)])
    with tempfile.TemporaryDirectory() as tmp:
        async with MCPManager(_artifact(Path(tmp))) as mcp, Client(params, cache=None) as bare:
            tool = {t.name: t for t in await mcp.tools("L1")}["mcp__s__echo"]
            context = ToolContext(adapter="L1")
            for _ in range(20):  # warm both paths
                await run_tool(tool, ARGS, context)
                await bare.call_tool("echo", ARGS)
            for index in range(rounds):
                for _ in range(calls):
                    start = time.perf_counter()
                    result = await run_tool(tool, ARGS, context)
                    mol_times.append(time.perf_counter() - start)
                    assert result.content == ARGS["text"], result
                    start = time.perf_counter()
                    reply = await bare.call_tool("echo", ARGS)
                    bare_times.append(time.perf_counter() - start)
                    assert reply.content[0].text == ARGS["text"]
                print(f"round {index + 1}/{rounds}", file=sys.stderr)
    mol_ms = statistics.median(mol_times) * 1000
    bare_ms = statistics.median(bare_times) * 1000
    return {"benchmark": "mcp_tool_call_round_trip", "calls_each": len(mol_times),
            "mol_median_ms": round(mol_ms, 3), "bare_sdk_median_ms": round(bare_ms, 3),
            "ratio": round(mol_ms / bare_ms, 3), "target_ratio": 1.2,
            "mol_p90_ms": round(statistics.quantiles(mol_times, n=10)[-1] * 1000, 3),
            "bare_sdk_p90_ms": round(statistics.quantiles(bare_times, n=10)[-1] * 1000, 3)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=40)
    options = parser.parse_args()
    figures = anyio.run(main, options.rounds, options.calls)
    print(f"mol:      median {figures['mol_median_ms']:.3f} ms  p90 {figures['mol_p90_ms']:.3f} ms")
    print(f"bare SDK: median {figures['bare_sdk_median_ms']:.3f} ms  p90 {figures['bare_sdk_p90_ms']:.3f} ms")
    print(f"ratio mol/bare: {figures['ratio']:.3f} (target <= {figures['target_ratio']})")
    print(json.dumps(figures))
