"""``mol eval run --ray`` against real Ray: a private ``local`` one, and a three-node
cluster on this machine (``raylab``), each inside a network namespace with loopback only.

- ``--ray local`` gives the outcomes and the trajectories, byte for byte, of a local run;
- episodes spread over the nodes by their ``mol_sandbox_slot``, never more at once on a
  node than its slots; a worker node killed mid-run loses nothing: its episode runs again
  elsewhere;
- a driver killed mid-run and started again runs only the missing episodes.

Every run here drives real sandboxes (Docker) and starts Ray processes: ``slow``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mol.eval.store import Store

from .conftest import HCP, SCRIPT, SCRIPTED_OUTCOMES, SUITE, mol, mol_json
from .raylab import RayLab

pytestmark = [pytest.mark.docker, pytest.mark.ray, pytest.mark.slow]

RUN_TIMEOUT = 400
"""Seconds a whole run may take on a loaded two-core machine."""


@pytest.fixture(scope="module")
def namespace() -> Iterator[RayLab]:
    """A lab of no nodes: the namespace, for a driver with its private ``--ray local``."""
    lab = RayLab([])
    try:
        yield lab
    finally:
        lab.close()


@pytest.fixture(scope="module")
def lab() -> Iterator[RayLab]:
    """The head (1 slot) and two workers (2 slots, 1 slot)."""
    lab = RayLab([1, 2, 1])
    try:
        yield lab
    finally:
        lab.close()


def run_argv(lab: RayLab, out: Path, url: str, *extra: str) -> list[str]:
    """``mol eval run`` of the example suite inside the lab's namespace."""
    return lab.mol("eval", "run", SUITE, "--hcp", HCP, "--engine-url", url, "--out", out,
                   "--json", *extra)


def run(lab: RayLab, out: Path, url: str, *extra: str) -> tuple[list[dict[str, Any]], str]:
    """Run to the end; (the JSON lines, stderr)."""
    done = subprocess.run(run_argv(lab, out, url, *extra), env=lab.env, capture_output=True,
                          text=True, timeout=RUN_TIMEOUT)
    assert done.returncode == 0, done.stderr[-3000:]
    return json_lines(done.stdout), done.stderr


def json_lines(stdout: str) -> list[dict[str, Any]]:
    """``--json`` output: every line a JSON object, nothing else (Ray prints none)."""
    strays = [line for line in stdout.splitlines() if not line.startswith("{")]
    assert strays == []
    return [json.loads(line) for line in stdout.splitlines()]


def rows(out: Path) -> dict[tuple[str, int], Any]:
    with Store(out, create=False) as store:
        return {(e.task, e.epoch): e for e in store.episodes()}


def test_ray_local_records_what_a_local_run_records(namespace: RayLab, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture) -> None:
    # One episode at a time against a fresh engine each: the engine's ids and prefix-cache
    # counts then depend on nothing but the episodes (docs/eval.md, Trajectories).
    # The two runs go side by side, each with its own engine, to save time.
    local, ray = tmp_path / "local", tmp_path / "ray"
    both = [subprocess.Popen(run_argv(namespace, out, namespace.engine(SCRIPT, log), "-j", "1",
                                      *extra), env=namespace.env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
            for out, log, extra in [(local, tmp_path / "a.log", ()),
                                    (ray, tmp_path / "b.log", ("--ray", "local"))]]
    try:
        err = [process.communicate(timeout=RUN_TIMEOUT)[1] for process in both]
    finally:
        for process in both:
            process.kill()
    assert [process.returncode for process in both] == [0, 0], err
    err = err[1]
    assert "Ray cluster 127.0.0.1:" in err and "1 node, 1 sandbox slots" in err
    here, there = rows(local), rows(ray)
    assert {t: e.outcome for (t, _), e in there.items()} == SCRIPTED_OUTCOMES
    assert {k: e.outcome for k, e in here.items()} == {k: e.outcome for k, e in there.items()}
    assert {e.placement for e in here.values()} == {"local"}
    assert len({e.placement for e in there.values()}) == 1
    assert all(e.placement.startswith("ray:") for e in there.values())
    for key, episode in here.items():
        mine = (local / episode.trajectory).read_bytes()
        assert mine == (ray / there[key].trajectory).read_bytes(), key
    columns = {"outcome", "reward", "reason", "steps", "reads", "prompt_tokens",
               "completion_tokens", "task_digest", "hcp_digest", "trajectory"}
    for key, episode in here.items():
        assert {c: getattr(episode, c) for c in columns} == \
            {c: getattr(there[key], c) for c in columns}, key
    # mol eval show tells the two apart by the placement column alone.
    shown = [mol_json(capsys, "eval", "show", out) for out in (local, ray)]
    node = next(iter(there.values())).placement
    assert [row.pop("placement") for row in shown[0]["tasks"]] == [["local"]] * 8
    assert [row.pop("placement") for row in shown[1]["tasks"]] == [[node]] * 8
    figures = ("tasks", "episodes", "passed", "failed", "errors", "pass_rate", "ci95")
    assert [{k: data[k] for k in figures} for data in shown] == \
        [{k: shown[0][k] for k in figures}] * 2
    code, text, _ = mol(capsys, "eval", "show", ray)
    assert code == 0 and "mean reward  placement" in text and f"  {node}\n" in text


def _most_at_once(episodes: list[Any]) -> int:
    """The most of ``episodes`` that ran at the same moment."""
    edges = sorted([(e.started, 1) for e in episodes] + [(e.finished, -1) for e in episodes])
    now = most = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def test_episodes_spread_by_slot_and_survive_a_worker_node_killed_mid_run(
        lab: RayLab, tmp_path: Path) -> None:
    victim = lab.nodes[2]  # the 1-slot worker
    url = lab.engine(SCRIPT, tmp_path / "engine.log", latency=0.3)
    out = tmp_path / "run"
    driver = subprocess.Popen(run_argv(lab, out, url, "--ray", lab.address),
                              env=lab.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        lost = _kill_when_busy(lab, victim, driver)
        stdout, stderr = driver.communicate(timeout=RUN_TIMEOUT)
    finally:
        driver.kill()
    assert driver.returncode == 0, stderr[-3000:]
    assert "Ray cluster 127.0.0.1:" in stderr and "3 nodes, 4 sandbox slots" in stderr
    assert "node lost" in stderr and "running it again on another node" in stderr
    lines = json_lines(stdout)
    assert lines[-1]["type"] == "summary" and len(lines) == 9
    found = rows(out)
    assert len(found) == 8 and all(e.outcome in ("pass", "fail") for e in found.values())
    assert {t: e.outcome for (t, _), e in found.items()} == SCRIPTED_OUTCOMES
    by_node: dict[str, list[Any]] = {}
    for episode in found.values():
        by_node.setdefault(episode.placement.removeprefix("ray:"), []).append(episode)
    slots = {node["name"]: node["slots"] for node in lab.nodes}
    assert set(by_node) <= set(slots) and len(by_node) >= 2
    for name, episodes in by_node.items():
        assert _most_at_once(episodes) <= slots[name], name
    # The head and the 2-slot worker both ran episodes; what the victim was running when it
    # died finished elsewhere (no episode row names it after its death).
    assert {lab.nodes[0]["name"], lab.nodes[1]["name"]} <= set(by_node)
    assert all(e.started < lost for e in by_node.get(victim["name"], []))


def _kill_when_busy(lab: RayLab, node: dict[str, Any], driver: subprocess.Popen,
                    timeout: float = 240) -> float:
    """Kill ``node`` the moment one of its workers has a sandbox up; when it died."""
    deadline = time.monotonic() + timeout
    while not lab.sandboxes(node):
        assert driver.poll() is None, "the run ended before an episode ran on the node"
        assert time.monotonic() < deadline, "no episode ever ran on the node to kill"
        time.sleep(0.2)
    lab.kill(node)
    return time.time()


def test_a_driver_killed_mid_run_and_started_again_runs_only_the_missing_episodes(
        lab: RayLab, tmp_path: Path) -> None:
    url = lab.engine(SCRIPT, tmp_path / "engine.log")
    out = tmp_path / "run"
    driver = subprocess.Popen(run_argv(lab, out, url, "--ray", lab.address), env=lab.env,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert driver.stdout is not None
        for _ in range(3):  # three episodes stored (the line follows the write)
            assert json.loads(driver.stdout.readline())["type"] == "episode"
    finally:
        driver.kill()  # SIGKILL: no cleanup runs
        driver.communicate()
    before = rows(out)
    assert 3 <= len(before) < 8
    lines, err = run(lab, out, url, "--ray", lab.address)
    missing = 8 - len(before)
    assert f"{missing} episodes to run (8 tasks x 1 epoch, {len(before)} stored)" in err
    assert len([line for line in lines if line["type"] == "episode"]) == missing
    after = rows(out)
    assert {t: e.outcome for (t, _), e in after.items()} == SCRIPTED_OUTCOMES
    assert {k: e.started for k, e in after.items() if k in before} == \
        {k: e.started for k, e in before.items()}


def test_mol_eval_worker_makes_a_node_that_runs_episodes(namespace: RayLab,
                                                         tmp_path: Path) -> None:
    port = "6391"  # the namespace has its own ports: nothing else binds here
    log = tmp_path / "worker.log"
    # Ray's socket paths must fit in 107 bytes: a short folder of its own, not tmp_path.
    folder = tempfile.mkdtemp(prefix="mol-w-")
    with log.open("w") as sink:
        head = subprocess.Popen(namespace.mol("eval", "worker", "--head", "--slots", "2",
                                              "--port", port, "--node-ip-address",
                                              "127.0.0.1", "--temp-dir", folder),
                                env=namespace.env, stdout=sink, stderr=sink)
    try:
        deadline = time.monotonic() + 120  # a loaded machine takes its time
        while "Ray runtime started" not in log.read_text():
            assert head.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.5)
        said = log.read_text()
        assert "[eval] 2 sandbox slots; running: ray start --block" in said
        assert '--resources={"mol_sandbox_slot": 2}' in said and "--head" in said
        out = tmp_path / "run"
        _, err = run(namespace, out, "http://127.0.0.1:9/v1", "--agent", "oracle", "--tasks",
                     "find-todo", "--ray", f"127.0.0.1:{port}")
        assert "1 node, 2 sandbox slots" in err
        (episode,) = rows(out).values()
        assert episode.outcome == "pass" and episode.placement.startswith("ray:")
    finally:
        head.terminate()  # ray start --block stops the node's processes on SIGTERM
        head.wait(timeout=90)
        shutil.rmtree(folder, ignore_errors=True)
    assert "received SIGTERM" in log.read_text()
