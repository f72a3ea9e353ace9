"""Eval throughput and the cost of recording, with the scripted engine, in one run.

Runs the example suite (eval/examples/terminal, 8 tasks, 2 epochs) through the full harness
against the scripted engine (terminal-script.toml, served by ``mol engine scripted`` in a
process of its own, as a real engine would be), each time into a fresh run folder:

- ``-j 1`` and ``-j 4`` runs (with recording, the default), in rounds whose order
  alternates so load that comes and goes hits both alike: episodes per minute (medians
  over the rounds) and the ``-j 4`` speedup (the median over rounds of the ``-j 1`` /
  ``-j 4`` wall-time ratio);
- the recording overhead: each round, every task's episode run twice back to back, with
  recording and with it off (``--no-record``), in alternating order, each stored as the
  runner stores it; the median over all pairs of (recorded / unrecorded) wall time,
  minus 1. And, as a figure Docker's noise does not move, the CPU time of the
  recording's own serialization (every record dumped, the trajectory parsed back for the
  HCP reads) per episode, as a share of the episode's wall time.

Targets: recording adds at most 5%; ``-j 4`` runs at least 2x the episodes per minute of
``-j 1``. Ends with one JSON line.

    python bench/eval_bench.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import anyio

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

EXAMPLES = Path(__file__).resolve().parents[1] / "eval" / "examples"
EPOCHS = 2
"""Epochs per run: 16 episodes, so that -j 4 is not measured on one short tail."""


async def timed_run(artifact, engine: str, jobs: int, record: bool,
                    ray: str | None = None) -> tuple[float, Path, int]:
    """Seconds one whole run of the suite took, its folder and its episode count (on the
    Ray cluster at ``ray``, when given: bench/ray_bench.py)."""
    from mol.eval.progress import Progress
    from mol.eval.runner import RunOptions, run_suite
    from mol.eval.store import Store

    out = Path(tempfile.mkdtemp(prefix="mol-eval-bench-")) / "run"
    options = RunOptions(EXAMPLES / "terminal", artifact, out, jobs=jobs, epochs=EPOCHS,
                         engine_url=engine, record=record, ray=ray)
    started = time.perf_counter()
    await run_suite(options, progress=Progress(0, quiet=True))
    elapsed = time.perf_counter() - started
    with Store(out, create=False) as store:
        found = store.episodes()
    outcomes = sorted(e.outcome for e in found)
    assert outcomes == ["fail"] * 3 * EPOCHS + ["pass"] * 5 * EPOCHS, outcomes  # as scripted
    return elapsed, out, len(found)


def recording_cpu(run: Path, artifact) -> tuple[float, float]:
    """(CPU seconds per episode of the recording's own serialization, mean episode wall
    seconds) for a recorded run: each record dumped again, each trajectory parsed back
    and its HCP reads derived, as ``mol.eval.episode`` does once per episode."""
    from mol.eval.store import Store
    from mol.eval.trajectories.format import dumps, parse
    from mol.eval.trajectories.reads import hcp_reads

    with Store(run, create=False) as store:
        episodes = store.episodes()
    spent = 0.0
    for episode in episodes:
        lines = (run / episode.trajectory).read_text().splitlines()
        records = parse(lines).records
        started = time.process_time()
        again = [dumps(record) for record in records]
        hcp_reads(parse(again), artifact)
        spent += time.process_time() - started
    return spent / len(episodes), statistics.mean(e.wall_sec for e in episodes)


@contextlib.contextmanager
def scripted_engine() -> Iterator[str]:
    """``mol engine scripted`` serving the example script in a process of its own (as a
    real engine is); yields its base URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "mol.cli", "engine", "scripted", "--script",
         str(EXAMPLES / "terminal-script.toml"), "--port", "0", "-q"],
        stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        found = re.search(r"http://\S+/v1", line)
        assert found, line
        yield found.group(0)
    finally:
        process.terminate()
        process.wait(timeout=30)


async def paired_episodes(artifact, engine: str) -> list[float]:
    """(recorded / unrecorded) wall time of each task's episode, run back to back in
    alternating order, each stored as the runner stores it (trajectory file and row)."""
    from mol.eval.episode import run_episode
    from mol.eval.images import ensure_image
    from mol.eval.store import Store
    from mol.eval.tasks import load_suite
    from mol.plugins.manager import PluginManager
    from mol.runtime.engine import LiteLLMEngine

    model = LiteLLMEngine.from_artifact(artifact, engine)
    plugins = PluginManager.for_artifact(artifact)
    ratios = []
    with Store(Path(tempfile.mkdtemp(prefix="mol-eval-bench-")) / "pairs") as store:
        for index, task in enumerate(load_suite(EXAMPLES / "terminal")):
            image = await ensure_image(task, artifact.doc.sandbox.image)
            seconds = {}
            for record in (True, False) if index % 2 == 0 else (False, True):
                started = time.perf_counter()
                episode = await run_episode(task, artifact, epoch=1 + record, image=image,
                                            engine=model, plugins=plugins, record=record)
                await store.aput(episode)
                seconds[record] = time.perf_counter() - started
            ratios.append(seconds[True] / seconds[False])
    return ratios


async def main(rounds: int) -> dict:
    from mol.hcp.loader import load

    artifact = load(EXAMPLES / "terminal-hcp.toml")
    configs = [(1, True), (4, True)]
    times: dict[tuple[int, bool], list[float]] = {config: [] for config in configs}
    pairs: list[float] = []
    with scripted_engine() as engine:
        _, recorded, episodes = await timed_run(artifact, engine, 4, True)  # images, litellm
        for index in range(rounds):
            order = configs if index % 2 == 0 else configs[::-1]
            for jobs, record in order:
                elapsed, _, _ = await timed_run(artifact, engine, jobs, record)
                times[(jobs, record)].append(elapsed)
            pairs += await paired_episodes(artifact, engine)
    cpu, episode_wall = recording_cpu(recorded, artifact)
    per_minute = {config: episodes * 60 / statistics.median(values)
                  for config, values in times.items()}
    # Runs of one round ran back to back: the median of per-round ratios is the figure
    # least moved by load that comes and goes (other processes share the machine).
    speedup = statistics.median(one / four for one, four in zip(times[(1, True)],
                                                                times[(4, True)], strict=True))
    return {
        "benchmark": "eval_throughput_and_recording",
        "rounds": rounds,
        "episodes_per_run": episodes,
        "episodes_per_min_j1": round(per_minute[(1, True)], 2),
        "episodes_per_min_j4": round(per_minute[(4, True)], 2),
        "speedup_j4": round(speedup, 3),
        "speedup_j4_of_medians": round(per_minute[(4, True)] / per_minute[(1, True)], 3),
        "recording_pairs": len(pairs),
        "recording_overhead": round(statistics.median(pairs) - 1, 4),
        "recording_cpu_ms_per_episode": round(cpu * 1000, 3),
        "recording_cpu_share": round(cpu / episode_wall, 5),
        "target_recording_overhead": 0.05,
        "target_speedup_j4": 2.0,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    figures = anyio.run(main, parser.parse_args().rounds)
    print(f"episodes per minute: -j 1 {figures['episodes_per_min_j1']:.1f}, "
          f"-j 4 {figures['episodes_per_min_j4']:.1f} (x{figures['speedup_j4']:.2f}; "
          f"target >= x{figures['target_speedup_j4']:g})")
    print(f"recording overhead (median of {figures['recording_pairs']} paired episodes) "
          f"{figures['recording_overhead'] * 100:+.2f}% (target <= "
          f"{figures['target_recording_overhead'] * 100:g}%); its own CPU time "
          f"{figures['recording_cpu_ms_per_episode']:.2f} ms per episode = "
          f"{figures['recording_cpu_share'] * 100:.3f}% of an episode")
    print(json.dumps(figures))
