"""What a Ray episode sends: task folders and HCP snapshots turned into files on a node
(content addressed, checked by digest), and results packed for the way back."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mol.core import __version__
from mol.core.errors import TaskError
from mol.eval.cluster.payload import Spec, materialize, pack, task_tree, unpack
from mol.eval.cluster.remote import Worker
from mol.eval.store import Episode
from mol.eval.tasks import load_suite, load_task
from mol.hcp.loader import load
from mol.hcp.snapshot import entries

from .conftest import HCP, SUITE


@pytest.fixture(autouse=True)
def node_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "mol" / "eval"


def test_a_task_folder_arrives_with_its_digest_modes_and_links(task_factory, node_cache) -> None:
    folder = task_factory("linked", solve="echo hi")
    os.chmod(folder / "solution" / "solve.sh", 0o755)
    os.symlink("../tests/test.sh", folder / "solution" / "check.sh")
    task = load_task(folder)
    files, links = task_tree(task)
    assert links == [("solution/check.sh", "../tests/test.sh")]
    there = materialize("tasks", task.digest, files, links)
    assert there.parent == node_cache / "tasks"
    assert load_task(there, "linked").digest == task.digest
    assert (there / "solution" / "solve.sh").stat().st_mode & 0o777 == 0o755
    # Written once: a second episode of the task finds the folder and writes nothing.
    assert materialize("tasks", task.digest, [], []) == there
    assert [p.name for p in there.parent.iterdir()] == [there.name]


@pytest.mark.parametrize("name", ["../escape", "/etc/passwd", "a/../../b"])
def test_a_sent_file_named_outside_its_folder_is_refused(name: str, node_cache) -> None:
    with pytest.raises(TaskError, match="only paths inside the folder travel"):
        materialize("tasks", "sha256:" + "0" * 64, [(name, b"x", 0o644)])
    assert not (node_cache / "tasks").exists()  # nothing half-written stays


def test_a_result_comes_back_with_its_trajectory_lines() -> None:
    episode = Episode("t", 2, "sha256:a", "sha256:b", "mol", outcome="pass", reward=1.0,
                      reads=["/sandbox"], placement="ray:host/0123abcd",
                      lines=['{"kind":"episode"}', '{"kind":"result"}'])
    back, notes = unpack(pack(episode, ["built image x"]))
    assert back == episode and back.lines == episode.lines and notes == ["built image x"]


def spec_of(task, artifact, **changes) -> Spec:
    fields = {"task": task.name, "task_digest": task.digest, "epoch": 1,
              "hcp_digest": artifact.digest, "agent": "oracle", "adapter": None,
              "engine_url": None, "record": True, "mol_version": __version__, **changes}
    return Spec(**fields)


def test_a_node_refuses_what_does_not_match_as_an_error_row(node_cache) -> None:
    task = next(t for t in load_suite(SUITE) if t.name == "find-todo")
    artifact = load(HCP)
    hcp, tree = entries(artifact), task_tree(task)
    worker = Worker()
    row = unpack(worker.run(spec_of(task, artifact, mol_version="0.0.1"), hcp, tree,
                            "ray:here/1"))[0]
    assert (row.outcome, row.reason, row.placement) == ("error", "internal", "ray:here/1")
    assert "the driver mol 0.0.1: install the same mol-agent everywhere" in row.error
    files, links = tree
    edited = ([(n, b"tampered\n" if n == "instruction.md" else data, mode)
               for n, data, mode in files], links)
    row = unpack(worker.run(spec_of(task, artifact), hcp, edited, "ray:here/1"))[0]
    assert (row.outcome, row.reason) == ("error", "task")
    assert "arrives here with digest" in row.error
    assert not (node_cache / "tasks" / task.digest.removeprefix("sha256:")[:40]).exists()
    assert (node_cache / "hcp").is_dir()  # the HCP did match, and stays for the next one
