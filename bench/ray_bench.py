"""Ray's scheduling overhead per episode against a local ``-j`` run of the same suite.

Runs the example suite (eval/examples/terminal, 8 tasks, 2 epochs) against the scripted
engine (``mol engine scripted``, a process of its own), each time into a fresh run folder:

- locally with ``-j 4``;
- with ``--ray ADDRESS`` on a one-node Ray cluster with 4 ``mol_sandbox_slot`` started
  once for the benchmark (``ray.cluster_utils.Cluster``): every run is a new driver (a
  Ray job), so its figure includes what each ``mol eval run --ray`` pays: joining the
  cluster, sending the HCP and the task folders, starting the node's worker processes.

in rounds whose order alternates, so load that comes and goes hits both alike. Reported
(medians over the rounds): the wall times and their ratio; the Ray run's startup (until
its first episode started); and the overhead per episode once running: (Ray - local)
span from the first episode's start to the last one's end, / episodes, and the same with
the startup included (wall times). The whole benchmark runs in a network namespace with loopback
only (it re-executes itself under ``unshare -n``: Ray binds nothing outside). Ends with
one JSON line.

    python bench/ray_bench.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import anyio
from eval_bench import EXAMPLES, scripted_engine, timed_run

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

JOBS = 4
INSIDE = "MOL_RAY_BENCH_NETNS"


async def measured(artifact, engine: str, ray: str | None) -> dict[str, float]:
    """One run: its wall time, the time until its first episode started (joining the
    cluster, sending, the node's worker processes starting), and the span from its first
    episode's start to its last one's end (the episodes themselves, and their scheduling)."""
    from mol.eval.store import Store

    began = time.time()
    elapsed, out, _ = await timed_run(artifact, engine, JOBS, True, ray)
    with Store(out, create=False) as store:
        episodes = store.episodes()
    first = min(e.started for e in episodes)
    return {"wall": elapsed, "startup": first - began,
            "span": max(e.finished for e in episodes) - first}


async def main(rounds: int, address: str) -> dict:
    from mol.hcp.loader import load

    artifact = load(EXAMPLES / "terminal-hcp.toml")
    runs: dict[str, list[dict[str, float]]] = {"local": [], "ray": []}
    with scripted_engine() as engine:
        _, _, episodes = await timed_run(artifact, engine, JOBS, True)  # images, litellm
        await timed_run(artifact, engine, JOBS, True, address)  # the node's folder cache
        for index in range(rounds):
            order = ["local", "ray"] if index % 2 == 0 else ["ray", "local"]
            for kind in order:
                runs[kind].append(await measured(artifact, engine,
                                                 address if kind == "ray" else None))
    pairs = list(zip(runs["local"], runs["ray"], strict=True))

    def median(key: str, kind: str) -> float:
        return round(statistics.median(run[key] for run in runs[kind]), 3)

    return {
        "benchmark": "ray_scheduling_overhead",
        "rounds": rounds,
        "episodes_per_run": episodes,
        "jobs": JOBS,
        "local_sec": median("wall", "local"),
        "ray_sec": median("wall", "ray"),
        "ray_over_local": round(statistics.median(r["wall"] / lo["wall"] for lo, r in pairs), 3),
        "ray_startup_sec": median("startup", "ray"),
        "local_startup_sec": median("startup", "local"),
        "local_span_sec": median("span", "local"),
        "ray_span_sec": median("span", "ray"),
        "overhead_sec_per_episode": round(statistics.median(
            (r["span"] - lo["span"]) / episodes for lo, r in pairs), 4),
        "overhead_sec_per_episode_with_startup": round(statistics.median(
            (r["wall"] - lo["wall"]) / episodes for lo, r in pairs), 4),
    }


def in_namespace(rounds: int) -> dict:
    """Bring loopback up, start the cluster, measure, stop it."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    # Ray's session files and its address file, and the node's cache of what the driver
    # sends, all in a folder of the benchmark's own (never /tmp/ray, never ~/.cache), and a
    # token of its own for Ray's token authentication (never ~/.ray/auth_token).
    folder = tempfile.mkdtemp(prefix="mol-ray-bench-")
    os.environ.update(RAY_TMPDIR=folder, XDG_CACHE_HOME=os.path.join(folder, "cache"),
                      RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))
    os.makedirs(os.path.join(folder, "ray"))
    from ray.cluster_utils import Cluster  # after the environment: Ray reads it at import

    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "node_ip_address": "127.0.0.1", "include_dashboard": False,
        "resources": {"mol_sandbox_slot": JOBS}, "temp_dir": os.path.join(folder, "ray")})
    try:
        return anyio.run(main, rounds, cluster.address)
    finally:
        cluster.shutdown()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if os.environ.get(INSIDE) != "1":
        os.execvpe("unshare", ["unshare", "-n", sys.executable, *sys.argv],
                   {**os.environ, INSIDE: "1"})
    figures = in_namespace(args.rounds)
    print(f"{figures['episodes_per_run']} episodes, -j {JOBS}: local {figures['local_sec']:.1f} "
          f"s, Ray {figures['ray_sec']:.1f} s (x{figures['ray_over_local']:.2f}), of which "
          f"{figures['ray_startup_sec']:.1f} s before the first episode started; once "
          f"running, {figures['overhead_sec_per_episode'] * 1000:+.0f} ms per episode")
    print(json.dumps(figures))
