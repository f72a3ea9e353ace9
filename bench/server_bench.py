"""Server overhead per turn: the official openai client -> ``mol serve`` -> harness ->
scripted engine, against calling the same harness in-process, in the same run.

One turn = route (L0, constrained) -> L2 answers -> summary (L0). Both sides are timed to
the moment the client has the answer: the server replies at the harness's ``Answered``
event (the summary hop finishes behind the reply), so the in-process side is timed to that
event too. The server side adds HTTP, JSON, the runner and a SQLite checkpoint (WAL,
synchronous=FULL) at every consistent point. Rounds alternate so machine noise hits both
alike, with a short untimed pause after each turn so the served turn's summary hop,
which finishes behind the reply, does not overlap the next request. Prints medians and
the ratio, then one JSON line.

    python bench/server_bench.py [--rounds 40]
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

HCP = """schema_version = 1
name = "bench"
[engine]
api_base = "http://127.0.0.1:9/v1"
max_retries = 0
[router]
prompt = "Route the turn to one of L0, L1, L2, L3."
[adapters.L2]
prompt = "You are the coding specialist."
[session]
store = "sqlite:///{store}"
"""

KEY = "bench-key"
SETTLE_SEC = 0.2


def _start_server(hcp: Path, engine_url: str) -> tuple[subprocess.Popen, str]:
    """``mol serve`` in its own process (its own GIL, as in production)."""
    key_file = hcp.parent / "key"
    key_file.write_text(KEY)
    port = free_port()
    proc = start_healthy(
        [sys.executable, "-m", "mol.cli", "serve", "--hcp", str(hcp), "--port", str(port),
         "--engine-url", engine_url], port, "mol serve",
        env={"MOL_API_KEY_FILE": str(key_file)}, timeout=60)
    return proc, f"http://127.0.0.1:{port}/v1"


def _commit_ms(folder: Path, count: int = 30) -> float:
    """Median cost of one durable SQLite commit (WAL, synchronous=FULL) on this disk: the
    server makes three before it replies (turn start, answer, the reply's mark)."""
    import sqlite3

    db = sqlite3.connect(folder / "commit.db", isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE t (v TEXT)")
    times = []
    for _ in range(count):
        started = time.perf_counter()
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO t VALUES (?)", ("x" * 2000,))
        db.execute("COMMIT")
        times.append(time.perf_counter() - started)
    db.close()
    return statistics.median(times) * 1000


async def main(rounds: int) -> dict:
    import openai

    from mol.core import events as ev
    from mol.hcp.loader import load
    from mol.plugins.manager import PluginManager
    from mol.runtime import Runtime
    from mol.runtime.testing import ScriptedEngine

    folder = Path(tempfile.mkdtemp())
    (folder / "bench.toml").write_text(HCP.format(store=folder / "sessions.db"))
    artifact = load(folder / "bench.toml")
    plugins = PluginManager(None, builtin=())
    async with ScriptedEngine.serve(SCRIPT) as engine:
        proc, url = _start_server(folder / "bench.toml", engine.base_url)
        client = openai.AsyncOpenAI(base_url=url, api_key=KEY, max_retries=0)

        async def served_turn() -> float:
            started = time.perf_counter()
            reply = await client.chat.completions.create(
                model="mol", messages=[{"role": "user", "content": "fix the failing test"}])
            assert reply.choices[0].message.content.startswith("Fixed"), reply
            return time.perf_counter() - started

        async def local_turn() -> float:
            answered: list[float] = []

            def on_event(event: ev.Event) -> None:
                if isinstance(event, ev.Answered):
                    answered.append(time.perf_counter())

            started = time.perf_counter()
            runtime = Runtime(artifact, engine_url=engine.base_url, plugins=plugins)
            async with runtime.session(observers=[on_event]) as h:
                result = await h.turn("fix the failing test")
            assert result.answer.startswith("Fixed"), result.answer
            return answered[0] - started

        try:
            for _ in range(3):  # warm-up: imports litellm in both processes, opens connections
                await served_turn()
                await local_turn()
            served, local = [], []
            for index in range(rounds):
                order = (served_turn, local_turn) if index % 2 == 0 else (local_turn, served_turn)
                for run in order:
                    (served if run is served_turn else local).append(await run())
                    # Let the served turn's summary hop (which runs after the reply) and
                    # litellm's logging callbacks finish, so each request meets an idle
                    # server, as the in-process side does. Not timed.
                    await anyio.sleep(SETTLE_SEC)
        finally:
            await client.close()
            proc.terminate()
            proc.wait(timeout=30)
    served_median, local_median = statistics.median(served), statistics.median(local)
    commit = _commit_ms(folder)
    return {
        "benchmark": "server_overhead_per_turn",
        "rounds": rounds,
        "server_turn_ms_median": round(served_median * 1000, 3),
        "in_process_turn_ms_median": round(local_median * 1000, 3),
        "overhead_ms_median": round((served_median - local_median) * 1000, 3),
        "ratio": round(served_median / local_median, 4),
        "sqlite_commit_ms_median": round(commit, 3),
        "durable_commits_before_reply": 3,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    figures = anyio.run(main, parser.parse_args().rounds)
    print(f"openai client -> mol serve  median {figures['server_turn_ms_median']:9.3f} ms")
    print(f"harness in-process          median {figures['in_process_turn_ms_median']:9.3f} ms")
    print(f"overhead {figures['overhead_ms_median']:.3f} ms per turn, "
          f"ratio {figures['ratio']:.3f}; one durable SQLite commit "
          f"{figures['sqlite_commit_ms_median']:.3f} ms (3 before each reply)")
    print(json.dumps(figures))
