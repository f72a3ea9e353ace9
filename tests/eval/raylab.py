"""A Ray cluster on this machine inside a network namespace with loopback only.

Ray binds its ports on the node's address; in a namespace of its own with only ``lo`` up it
binds nothing the machine's network can see. ``RayLab`` starts this file as a program
under ``unshare -n``: it brings ``lo`` up, starts a ``ray.cluster_utils.Cluster`` (a head
and worker nodes, each advertising ``mol_sandbox_slot``, with fast health checks so a
killed node is noticed in seconds), and answers JSON commands on stdin (kill or add a node,
list the live nodes, start a scripted engine inside the namespace). Commands the tests run
there (``mol eval run --ray ADDRESS``, ``mol eval worker``) enter the namespace with
``nsenter``. Ray's session files, its address file and the nodes' caches go to the lab's
own folder: nothing relies on (or leaves) ``/tmp/ray``.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

SLOT = "mol_sandbox_slot"
OWNER = "org.mol.owner"
"""The label naming the process that created a sandbox (``mol.sandboxes.owner``)."""
COMMON = {"num_cpus": 1, "node_ip_address": "127.0.0.1"}
"""Every node: one CPU for Ray's own (episodes take none), bound to loopback."""
HEALTH = {"health_check_period_ms": 500, "health_check_failure_threshold": 4,
          "health_check_timeout_ms": 1000, "health_check_initial_delay_ms": 0}
"""A killed node is declared dead after about two seconds (Ray's default: about 30)."""


def lab_env(folder: Path) -> dict[str, str]:
    """The environment of everything in the lab: Ray's temp dir, the nodes' cache, and a
    token of the lab's own for Ray's token authentication (else Ray keeps one in
    ``~/.ray/auth_token``, making one when there is none)."""
    return {**os.environ, "RAY_TMPDIR": str(folder), "XDG_CACHE_HOME": str(folder / "cache"),
            "RAY_USAGE_STATS_ENABLED": "0", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}


class RayLab:
    """The test side: starts the controller and talks to it."""

    def __init__(self, slots: list[int]) -> None:
        # Ray's socket paths under its temp dir must fit AF_UNIX's 107 bytes: pytest's
        # (per xdist worker) temp paths are too deep, so the lab keeps a short one.
        self.folder = folder = Path(tempfile.mkdtemp(prefix="mol-ray-"))
        self.env = lab_env(folder)
        self.process = subprocess.Popen(
            ["unshare", "-n", sys.executable, __file__, json.dumps(slots)], env=self.env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        started = self._read()
        self.address: str | None = started["address"]
        """The cluster's ``HOST:PORT`` (``None`` for a lab of no nodes: a namespace only)."""
        self.nodes: list[dict[str, Any]] = started["nodes"]
        """Every node started, by index: ``id``, ``name`` (as in ``placement``), ``raylet``
        (its pid), ``slots``, ``alive``."""
        for node, count in zip(self.nodes, slots, strict=True):
            node.update(alive=True, slots=count)
        self.left: list[str] = []
        """Sandboxes that killed nodes left behind (removed at ``close``)."""

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, f"the Ray lab stopped (exit {self.process.poll()})"
        answer = json.loads(line)
        assert "error" not in answer, answer["error"]
        return answer

    def ask(self, op: str, **fields: Any) -> dict[str, Any]:
        """Send one command; returns its answer."""
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"op": op, **fields}) + "\n")
        self.process.stdin.flush()
        return self._read()

    def kill(self, node: dict[str, Any]) -> None:
        """Kill a node's processes at once (SIGKILL), as a machine that dies."""
        self.left += self.sandboxes(node)  # once its raylet is gone they are no one's
        self.ask("kill", node=node["index"])
        node["alive"] = False

    def add(self, slots: int = 1) -> dict[str, Any]:
        """Start one more worker node."""
        node = {**self.ask("add", slots=slots), "alive": True, "slots": slots}
        self.nodes.append(node)
        return node

    def workers(self) -> list[dict[str, Any]]:
        """The live nodes other than the head (which holds the cluster)."""
        return [node for node in self.nodes[1:] if node["alive"]]

    def inside(self, *argv: str | Path) -> list[str]:
        """``argv`` run inside the lab's network namespace."""
        return ["nsenter", f"--net=/proc/{self.process.pid}/ns/net", *map(str, argv)]

    def mol(self, *argv: str | Path) -> list[str]:
        """``mol ARGV`` inside the namespace (this Python, this checkout's mol)."""
        return self.inside(sys.executable, "-m", "mol.cli", *argv)

    def engine(self, script: str | Path, log: Path, latency: float = 0.0) -> str:
        """A scripted engine inside the namespace logging each request to ``log``; its URL."""
        return self.ask("engine", script=str(script), log=str(log), latency=latency)["url"]

    def sandboxes(self, node: dict[str, Any]) -> list[str]:
        """The ids of the sandbox containers that processes of ``node`` created (its Ray
        workers are children of its raylet)."""
        found = subprocess.run(["docker", "ps", "-a", "--filter", f"label={OWNER}", "--format",
                                f'{{{{.ID}}}} {{{{.Label "{OWNER}"}}}}'], capture_output=True,
                               text=True, check=True).stdout.split("\n")
        ids = []
        for line in filter(None, found):
            cid, label = line.split(" ", 1)
            pid = label.rsplit("/", 2)[-2]
            if pid.isdigit() and _descends(int(pid), node["raylet"]):
                ids.append(cid)
        return ids

    def close(self) -> None:
        """Stop the cluster and the engines; remove what killed nodes left."""
        for node in self.nodes:
            if node["alive"]:
                self.left += self.sandboxes(node)
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        if self.left:
            subprocess.run(["docker", "rm", "-f", *self.left], capture_output=True, check=False)
            self.left = []
        shutil.rmtree(self.folder, ignore_errors=True)


def _descends(pid: int, ancestor: int) -> bool:
    """Whether ``pid`` is ``ancestor`` or runs under it (while both live)."""
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return False


def _node(node: Any, index: int) -> dict[str, Any]:
    raylet = node.all_processes["raylet"][0].process.pid
    return {"index": index, "id": node.node_id, "name": f"{os.uname().nodename}/"
            f"{node.node_id[:8]}", "raylet": raylet}


def _start_cluster(slots: list[int], folder: Path) -> tuple[Any, list[Any]]:
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={
        **COMMON, "resources": {SLOT: slots[0]}, "include_dashboard": False,
        "temp_dir": str(folder / "ray"), "_system_config": HEALTH})
    return cluster, [cluster.head_node] + [cluster.add_node(**COMMON, resources={SLOT: n})
                                           for n in slots[1:]]


def _answer(command: dict[str, Any], cluster: Any, nodes: list[Any],
            engines: list[Any]) -> dict[str, Any]:
    from mol.runtime.testing import ScriptedEngine

    op = command["op"]
    if op == "engine":
        engine = ScriptedEngine(Path(command["script"]), log_path=command["log"],
                                latency=command.get("latency", 0.0))
        engine.start()
        engines.append(engine)
        return {"url": engine.base_url}
    if cluster is None:
        return {"error": f"{op!r}: this lab has no cluster"}
    if op == "kill":
        cluster.remove_node(nodes[command["node"]], allow_graceful=False)
        return {"killed": command["node"]}
    if op == "add":
        nodes.append(cluster.add_node(**COMMON, resources={SLOT: command["slots"]}))
        return _node(nodes[-1], len(nodes) - 1)
    return {"error": f"unknown op {op!r}"}


def _controller(slots: list[int]) -> None:  # pragma: no cover - runs in the namespace
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    folder = Path(os.environ["RAY_TMPDIR"])
    (folder / "ray").mkdir(parents=True, exist_ok=True)
    cluster, nodes = _start_cluster(slots, folder) if slots else (None, [])
    engines: list[Any] = []

    def say(value: dict[str, Any]) -> None:
        print(json.dumps(value), flush=True)

    say({"address": cluster.address if cluster else None,
         "nodes": [_node(n, i) for i, n in enumerate(nodes)]})
    try:
        for line in sys.stdin:
            try:
                say(_answer(json.loads(line), cluster, nodes, engines))
            except Exception as exc:  # the test sees it as an answer, not a dead lab
                say({"error": f"{type(exc).__name__}: {exc}"})
    finally:
        for engine in engines:
            engine.stop()
        if cluster is not None:
            cluster.shutdown()


if __name__ == "__main__":
    _controller(json.loads(sys.argv[1]))
