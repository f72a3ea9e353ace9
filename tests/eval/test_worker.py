"""``mol eval worker``: the ``ray start`` line it runs, and what it refuses."""

from __future__ import annotations

import json
import sys

import pytest

from mol.core.errors import UsageError
from mol.eval.cluster.worker import WorkerOptions, start_argv

from .conftest import mol


def test_a_worker_joins_the_head_with_its_sandbox_slots() -> None:
    argv = start_argv(WorkerOptions(3, address="10.0.0.5:6379", node_ip="10.0.0.7",
                                    temp_dir="/var/tmp/ray"))
    assert argv[:5] == [sys.executable, "-m", "ray.scripts.scripts", "start", "--block"]
    assert f"--resources={json.dumps({'mol_sandbox_slot': 3})}" in argv
    assert {"--address=10.0.0.5:6379", "--node-ip-address=10.0.0.7",
            "--temp-dir=/var/tmp/ray", "--num-cpus=1", "--disable-usage-stats"} <= set(argv)
    assert not any(arg.startswith("--head") for arg in argv)


def test_a_worker_joins_the_head_ray_address_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")
    assert "--address=10.0.0.5:6379" in start_argv(WorkerOptions(1))
    assert "--address=10.0.0.6:6379" in start_argv(WorkerOptions(1, address="10.0.0.6:6379"))


def test_a_head_node_gets_its_port_and_no_dashboard() -> None:
    argv = start_argv(WorkerOptions(2, head=True, port=7000))
    assert {"--head", "--port=7000", "--include-dashboard=false"} <= set(argv)
    assert not any(arg.startswith("--address") for arg in argv)


def test_no_slots_is_refused() -> None:
    with pytest.raises(UsageError, match="--slots takes a positive number"):
        start_argv(WorkerOptions(0, head=True))


def test_a_worker_without_a_head_to_join_says_how_to_name_one(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    code, _, err = mol(capsys, "eval", "worker", "--slots", "2")
    assert code == 2 and "give --address HOST:PORT of the head node" in err
    assert "Traceback" not in err
