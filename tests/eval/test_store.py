"""The results store: idempotent writes, one run per folder, what a rerun still has to do."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from mol.core.errors import EvalError
from mol.eval.runner import RunOptions, pending
from mol.eval.store import Episode, Store
from mol.eval.tasks import load_suite

from .conftest import write_task

DIGEST = "sha256:" + "b" * 64


def episode(task: str, epoch: int = 1, **fields) -> Episode:
    return Episode(task, epoch, "sha256:t", DIGEST, "mol", **fields)


def test_writing_an_episode_twice_leaves_one_row_and_one_file(tmp_path: Path) -> None:
    with Store(tmp_path) as store:
        store.put(episode("a", outcome="fail", lines=['{"kind":"episode"}']))
        store.put(episode("a", outcome="pass", reward=1.0, lines=['{"kind":"episode"}', "{}"]))
        store.put(episode("a", 2, outcome="error", reason="sandbox", error="no docker"))
        rows = store.episodes()
        assert [(e.task, e.epoch, e.outcome) for e in rows] == [("a", 1, "pass"),
                                                                ("a", 2, "error")]
        assert rows[0].trajectory == "trajectories/a.1.jsonl" and rows[1].trajectory is None
        assert (tmp_path / rows[0].trajectory).read_text() == '{"kind":"episode"}\n{}\n'
        assert list((tmp_path / "trajectories").glob("*.partial")) == []
        assert rows[1].error == "no docker" and store.integrity() == "ok"


def test_a_folder_holds_one_run_and_says_whose(tmp_path: Path) -> None:
    with Store(tmp_path) as store:
        store.claim({"hcp_digest": DIGEST, "agent": "mol", "adapter": ""}, {"created": 1.0})
        store.claim({"hcp_digest": DIGEST, "agent": "mol", "adapter": ""}, {"created": 2.0})
        assert store.meta()["created"] == 1.0  # the first claim's extras stay
        with pytest.raises(EvalError, match=r"holds another run \(agent is 'mol', not "
                                            r"'oracle'\): give another --out"):
            store.claim({"hcp_digest": DIGEST, "agent": "oracle", "adapter": ""})


def test_a_store_from_a_newer_mol_is_refused(tmp_path: Path) -> None:
    Store(tmp_path).close()
    with sqlite3.connect(tmp_path / "results.db") as db:
        db.execute("PRAGMA user_version = 99")
    with pytest.raises(EvalError, match="results schema 99 is newer than this mol knows"):
        Store(tmp_path)


def test_a_rerun_does_what_is_missing_changed_or_asked_for(tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        write_task(tmp_path / "suite", name, test="true")
    tasks = load_suite(tmp_path / "suite")
    digest = {t.name: t.digest for t in tasks}
    stored = {("a", 1): Episode("a", 1, digest["a"], DIGEST, "mol", outcome="pass"),
              ("b", 1): Episode("b", 1, digest["b"], DIGEST, "mol", outcome="error"),
              ("c", 1): Episode("c", 1, "sha256:older", DIGEST, "mol", outcome="fail")}
    options = RunOptions(tmp_path / "suite", None)

    def todo(epochs: int = 1, **flags: bool) -> list[tuple[str, int]]:
        for flag, value in flags.items():
            setattr(options, flag, value)
        return [(task.name, epoch) for task, epoch in pending(tasks, epochs, stored, options)]

    assert todo() == [("c", 1)]  # c's task folder changed since
    assert todo(2) == [("c", 1), ("a", 2), ("b", 2), ("c", 2)]
    assert todo(retry_errors=True) == [("b", 1), ("c", 1)]
    assert todo(retry_errors=False, redo=True) == [("a", 1), ("b", 1), ("c", 1)]


def test_a_rerun_redoes_what_ran_under_another_key(tmp_path: Path) -> None:
    from mol.core import __version__
    from mol.eval import keys

    write_task(tmp_path / "suite", "a", test="true")
    [task] = load_suite(tmp_path / "suite")
    key = keys.ResultKey("sha256:behaviour", "models:m")

    def row(**fields) -> Episode:
        base = {"behaviour_digest": "sha256:behaviour", "model": "models:m",
                "mol_version": __version__, "outcome": "pass"}
        return Episode("a", 1, task.digest, DIGEST, "mol", **{**base, **fields})

    def redone(stored: Episode) -> bool:
        return pending([task], 1, {("a", 1): stored}, RunOptions(tmp_path, None), key) != []

    assert not redone(row())
    assert redone(row(model="models:other"))
    assert redone(row(mol_version="0.0.1"))
    assert redone(row(behaviour_digest="sha256:other"))
    assert not redone(row(behaviour_digest="sha256:other", inherited=DIGEST))  # mol evolve's
    assert redone(row(behaviour_digest="sha256:other", inherited=DIGEST, model="models:x"))


def test_a_folder_from_before_behaviour_digests_holds_only_its_own_artifact(
        tmp_path: Path) -> None:
    from types import SimpleNamespace

    from mol.eval import keys

    with Store(tmp_path) as store:
        store.claim({"hcp_digest": DIGEST, "agent": "mol", "adapter": ""})
        mine = SimpleNamespace(digest=DIGEST, behaviour_digest="sha256:behaviour")
        keys.claim(store, mine, "mol", None, {})
        assert store.meta()["behaviour_digest"] == "sha256:behaviour"
    with Store(tmp_path / "old") as store:
        store.claim({"hcp_digest": DIGEST, "agent": "mol", "adapter": ""})
        other = SimpleNamespace(digest="sha256:" + "c" * 64, behaviour_digest="sha256:x")
        with pytest.raises(EvalError, match="holds another run"):
            keys.claim(store, other, "mol", None, {})
