"""Where an eval episode's CPU goes, and the `-j 4` speedup it allows on this machine.

Runs the example suite (as bench/eval_bench.py does: 16 episodes, the scripted engine in a
process of its own) at ``-j 1`` and ``-j 4`` under ``perf record -a`` (every CPU, 499 Hz)
and groups the samples by process: this one (``mol``), the scripted engine, ``dockerd``,
the processes dockerd starts from its own binary (``dockerd-reexec``: the network
namespace helper of ``--network none``, the archive API's tar), ``containerd``, the
shims, ``runc`` (with ``runc init`` and the OCI hooks it runs) and the processes inside
this run's containers; other containers and processes are left out (``others``). Per
episode, in ms, with the share of it that ran while both cores were busy with this run's
processes.

The figure that bounds ``-j 4``: at ``-j 1`` the run keeps ``busy`` of the machine's
cores busy; ``-j 4`` can at best keep all of them busy, so its speedup is at most
``1 / busy`` (CPU per episode the same at both), on a quiet machine: other work takes
cores from ``-j 1`` (``others_share_j1`` says how much). Needs ``perf`` and the right to
sample every CPU (root). Ends with one JSON line.

    python bench/eval_cpu.py
"""

from __future__ import annotations

import collections
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import anyio
import eval_bench  # the benchmark next to this one (its run and its engine): run as a script

FREQ = 499
"""Samples per second per CPU."""

GROUPS = ("mol", "engine", "dockerd", "dockerd-reexec", "containerd", "containerd-shim",
          "runc", "container", "kernel")

_FORK = re.compile(r"PERF_RECORD_FORK\((\d+):(\d+)\):\((\d+):(\d+)\)")
_SAMPLE = re.compile(r"^\s*(.+?)\s+(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+):\s*$")


class Shims:
    """Which shim serves which container (from their command lines, polled), and which
    containers this run created."""

    def __init__(self) -> None:
        self.ids: dict[int, str] = {}
        self.mine: set[str] = set()
        self.tid = 0
        self._stop = threading.Event()

    def __enter__(self) -> Shims:
        from mol.sandboxes import docker

        create = docker.create_container

        def recorded(*args: object, **kwargs: object) -> str:
            container = create(*args, **kwargs)
            self.mine.add(container)
            return container

        docker.create_container = recorded
        threading.Thread(target=self._watch, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()

    def _watch(self) -> None:
        self.tid = threading.get_native_id()  # its own samples are left out
        while not self._stop.is_set():
            for entry in Path("/proc").glob("[0-9]*"):
                pid = int(entry.name)
                if pid in self.ids:
                    continue
                try:
                    argv = (entry / "cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if argv and b"containerd-shim" in argv[0] and b"-id" in argv[:-1]:
                    self.ids[pid] = argv[argv.index(b"-id") + 1].decode()
            self._stop.wait(0.03)


def parse(data: str, skip_tid: int) -> tuple[dict[int, int], dict[int, set[str]], list]:
    """Parents (from fork events), names per pid and ``(time, cpu, pid, name)`` samples."""
    text = subprocess.run(["perf", "script", "-i", data, "--show-task-events", "-F",
                           "comm,pid,tid,cpu,time"], capture_output=True, text=True,
                          check=True).stdout
    parent: dict[int, int] = {}
    names: dict[int, set[str]] = collections.defaultdict(set)
    samples = []
    for line in text.splitlines():
        if "PERF_RECORD_FORK" in line:
            found = _FORK.search(line)
            if found and found[1] == found[2] and found[1] != found[3]:
                parent[int(found[1])] = int(found[3])
            continue
        found = _SAMPLE.match(line)
        if found and int(found[3]) != skip_tid:
            pid, name = int(found[2]), found[1]
            names[pid].add(name)
            samples.append((float(found[5]), int(found[4]), pid, name))
    return parent, names, samples


def classifier(parent: dict[int, int], names: dict[int, set[str]], shims: Shims,
               mol: int, engine: int):
    """``kind(pid, name)``: the group a sample belongs to."""

    def container_of(pid: int) -> str | None:
        for _ in range(64):
            if pid in shims.ids:
                return shims.ids[pid]
            pid = parent.get(pid, 0)
            if pid in (0, 1):
                return None
        return None

    def kind(pid: int, name: str) -> str:
        if pid == 0:
            return "idle"
        if pid in (mol, engine):
            return "mol" if pid == mol else "engine"
        container = container_of(pid)
        if container is not None and container not in shims.mine:
            return "others"
        if name == "exe" and "dockerd" in names.get(parent.get(pid, 0), ()):
            return "dockerd-reexec"
        if name == "exe" or name.startswith("runc"):
            return "runc"
        if name.startswith("containerd-shim"):
            return "containerd-shim"
        if name in ("dockerd", "containerd"):
            return name
        if container is not None:
            return "container"
        if name.startswith(("kworker", "ksoftirqd", "rcu_", "migration", "kcompact")):
            return "kernel"
        return "others"

    return kind


def breakdown(data: str, shims: Shims, engine: int, episodes: int) -> dict:
    """Per-episode ms of each group, and of each while both cores ran this run's work."""
    parent, names, samples = parse(data, shims.tid)
    kind = classifier(parent, names, shims, os.getpid(), engine)
    total: collections.Counter[str] = collections.Counter()
    both: collections.Counter[str] = collections.Counter()
    buckets: dict[int, list[tuple[int, str]]] = collections.defaultdict(list)
    for when, cpu, pid, name in samples:
        group = kind(pid, name)
        total[group] += 1
        if group in GROUPS:
            buckets[round(when * FREQ)].append((cpu, group))
    for items in buckets.values():
        if len({cpu for cpu, _ in items}) > 1:
            both.update(group for _, group in items)
    scale = 1000 / FREQ / episodes
    return {"ms": {g: round(total[g] * scale, 1) for g in (*GROUPS, "others", "idle")},
            "ms_both_cores": {g: round(both[g] * scale, 1) for g in GROUPS}}


def measured(artifact, url: str, jobs: int, shims: Shims, engine: int) -> dict:
    """One run of the suite at ``jobs`` under ``perf record``, broken down."""
    data = tempfile.mktemp(prefix="mol-eval-cpu-", suffix=".data")
    perf = subprocess.Popen(["perf", "record", "-a", "-F", str(FREQ), "-e", "cpu-clock", "-o",
                             data], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)  # perf is sampling
        wall, _, episodes = anyio.run(eval_bench.timed_run, artifact, url, jobs, True)
        perf.send_signal(signal.SIGINT)
        perf.wait(timeout=60)
        figures = breakdown(data, shims, engine, episodes)
    finally:
        if perf.poll() is None:
            perf.kill()
        Path(data).unlink(missing_ok=True)
    cpu = sum(figures["ms"][group] for group in GROUPS)
    return {"jobs": jobs, "episodes": episodes, "wall_ms_per_episode": round(wall * 1000 /
            episodes, 1), "cpu_ms_per_episode": round(cpu, 1), **figures}


def engine_pid(script: Path) -> int:
    """The pid of the scripted engine serving ``script`` (started by eval_bench)."""
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"scripted" in argv and str(script).encode() in argv:
            return int(entry.name)
    return -1


def main() -> dict:
    from mol.hcp.loader import load

    artifact = load(eval_bench.EXAMPLES / "terminal-hcp.toml")
    cores = os.cpu_count() or 1
    with Shims() as shims, eval_bench.scripted_engine() as url:
        engine = engine_pid(eval_bench.EXAMPLES / "terminal-script.toml")
        anyio.run(eval_bench.timed_run, artifact, url, 4, True)  # images, imports
        one = measured(artifact, url, 1, shims, engine)
        four = measured(artifact, url, 4, shims, engine)
    busy = one["cpu_ms_per_episode"] / (one["wall_ms_per_episode"] * cores)
    # Other work on the machine takes cores from -j 1 (which then waits for them), so the
    # bound means something only when it is small next to the run's own.
    others = one["ms"]["others"] / max(one["cpu_ms_per_episode"], 1)
    return {"benchmark": "eval_cpu_breakdown", "cores": cores, "j1": one, "j4": four,
            "j1_cores_busy": round(busy, 3), "speedup_bound_j4": round(1 / busy, 3),
            "speedup_j4": round(one["wall_ms_per_episode"] / four["wall_ms_per_episode"], 3),
            "others_share_j1": round(others, 3), "load_average": os.getloadavg()[0]}


if __name__ == "__main__":
    figures = main()
    for run in (figures["j1"], figures["j4"]):
        print(f"-j {run['jobs']}: {run['wall_ms_per_episode']:.0f} ms wall, "
              f"{run['cpu_ms_per_episode']:.0f} ms CPU per episode")
        for group in GROUPS:
            print(f"  {group:<16} {run['ms'][group]:7.1f} ms  (both cores busy: "
                  f"{run['ms_both_cores'][group]:.1f})")
    print(f"-j 1 keeps {figures['j1_cores_busy']:.0%} of {figures['cores']} cores busy: "
          f"-j 4 can be at most x{figures['speedup_bound_j4']:.2f} (measured "
          f"x{figures['speedup_j4']:.2f})")
    if figures["others_share_j1"] > 0.1:
        print(f"(other processes used {figures['others_share_j1']:.0%} as much CPU as the -j 1 "
              "run: the bound holds on a quiet machine only)")
    print(json.dumps(figures))
