"""Turns per second of ``mol serve`` on its session stores: one replica on SQLite, one on
PostgreSQL, and two replicas sharing that PostgreSQL, in the same run.

Each configuration serves the same load: ``--conversations`` concurrent conversations
(the official ``openai`` async client), each ``--turns`` Responses turns chained by
``previous_response_id``; with two replicas the requests of a conversation alternate
between them, so every turn is resumed by the replica that did not write the last one
(its lease, marks and views come from the database). One turn = route (L0) -> answer (L2)
-> summary (L0) against the scripted engine. Configurations take turns, ``--rounds``
times, so machine noise hits all alike; medians of turns/s, ratios against one replica on
SQLite. PostgreSQL is a throwaway cluster (``initdb`` in a temp dir; Debian's
``postgresql``). Ends with one JSON line.

    python bench/replicas_bench.py [--rounds 3] [--conversations 8] [--turns 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from procs import free_port, start_healthy

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
[[L0]]
constrained = true
times = -1
reply = "L2"
[[L2]]
times = -1
reply = "Fixed: the off-by-one in the loop bound is gone and the tests pass."
[[L0]]
constrained = false
times = -1
reply = "The user asked for a fix; L2 fixed the loop bound."
"""

HCP = """schema_version = 2
name = "bench"
[engine]
api_base = "http://127.0.0.1:9/v1"
max_retries = 0
[router]
prompt = "Route the turn to one of L0, L1, L2, L3."
[adapters.L2]
prompt = "You are the coding specialist."
[session]
store = "{store}"
"""

KEY = "bench-key"


def _start(folder: Path, store: str, engine_url: str) -> tuple[subprocess.Popen, str]:
    """One ``mol serve`` replica in its own process on ``store``."""
    port = free_port()
    hcp = folder / f"bench-{port}.toml"
    hcp.write_text(HCP.format(store=store))
    (folder / "key").write_text(KEY)
    proc = start_healthy(
        [sys.executable, "-m", "mol.cli", "serve", "--hcp", str(hcp), "--port", str(port),
         "--engine-url", engine_url], port, f"mol serve on {store}",
        env={"MOL_API_KEY_FILE": str(folder / "key")})
    return proc, f"http://127.0.0.1:{port}/v1"


async def _load(urls: list[str], conversations: int, turns: int) -> float:
    """Turns per second for ``conversations`` concurrent chains of ``turns`` turns, each
    request on the next replica in turn."""
    import openai

    clients = [openai.AsyncOpenAI(base_url=url, api_key=KEY, timeout=60) for url in urls]

    async def chain(offset: int) -> None:
        previous = None
        for turn in range(turns):
            client = clients[(offset + turn) % len(clients)]
            reply = await client.responses.create(model="mol", input="fix the failing test",
                                                  previous_response_id=previous)
            assert reply.output_text.startswith("Fixed"), reply
            previous = reply.id

    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        for offset in range(conversations):
            group.start_soon(chain, offset)
    elapsed = time.perf_counter() - started
    for client in clients:
        await client.close()
    return conversations * turns / elapsed


async def main(rounds: int, conversations: int, turns: int) -> dict:
    sys.path.insert(0, str(ROOT / "tests"))
    from pgcluster import PostgresCluster

    from mol.runtime.testing import ScriptedEngine

    folder = Path(tempfile.mkdtemp())
    cluster = PostgresCluster()
    procs: list[subprocess.Popen] = []
    try:
        postgres = cluster.database()
        async with ScriptedEngine.serve(SCRIPT) as engine:
            sqlite_proc, sqlite_url = _start(folder, f"sqlite:///{folder}/s.db", engine.base_url)
            pg_procs = [_start(folder, postgres, engine.base_url) for _ in range(2)]
            procs = [sqlite_proc, *(p for p, _ in pg_procs)]
            setups = {"sqlite_1": [sqlite_url], "postgres_1": [pg_procs[0][1]],
                      "postgres_2": [url for _, url in pg_procs]}
            for urls in setups.values():  # warm-up: imports, connections, pools
                await _load(urls, 2, 2)
            rates: dict[str, list[float]] = {name: [] for name in setups}
            for index in range(rounds):
                names = list(setups)[index % 3:] + list(setups)[:index % 3]
                for name in names:
                    rates[name].append(await _load(setups[name], conversations, turns))
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)
        cluster.stop()
    medians = {name: statistics.median(values) for name, values in rates.items()}
    base = medians["sqlite_1"]
    return {
        "benchmark": "replicas_turns_per_second",
        "rounds": rounds, "conversations": conversations, "turns_per_conversation": turns,
        **{f"{name}_turns_per_s_median": round(rate, 2) for name, rate in medians.items()},
        "postgres_1_ratio": round(medians["postgres_1"] / base, 3),
        "postgres_2_ratio": round(medians["postgres_2"] / base, 3),
        "cpus": os.cpu_count(),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--conversations", type=int, default=8)
    parser.add_argument("--turns", type=int, default=5)
    options = parser.parse_args()
    figures = anyio.run(main, options.rounds, options.conversations, options.turns)
    for name in ("sqlite_1", "postgres_1", "postgres_2"):
        print(f"{name:11s} {figures[f'{name}_turns_per_s_median']:8.2f} turns/s (median)")
    print(json.dumps(figures))
