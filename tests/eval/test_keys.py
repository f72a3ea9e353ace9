"""What results are keyed by: moving the engine keeps them (the behaviour digest), another
model (the engine's fingerprint) does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from mol.cli.main import main
from mol.eval.store import Store
from mol.runtime.testing import ScriptedEngine

from .conftest import PASS, hcp_text, write_task

pytestmark = pytest.mark.docker

SCRIPT = """
[[L0]]
constrained = true
times = -1
reply = "L2"
[[L0]]
times = -1
reply = "Summary."
[[L2]]
times = -1
reply = "Done."
"""


def rows(run: Path) -> dict[str, tuple]:
    with Store(run, create=False) as store:
        return {e.task: (e.started, e.behaviour_digest, e.model) for e in store.episodes()}


def test_results_survive_a_moved_engine_and_not_another_model(tmp_path: Path) -> None:
    write_task(tmp_path / "suite", "one", test=PASS)
    section = "[adapters.L2]\nprompt = \"You code.\"\n"
    here, moved = tmp_path / "here.toml", tmp_path / "moved.toml"
    here.write_text(hcp_text('[engine]\napi_base = "http://127.0.0.1:1/v1"\nmax_retries = 0\n',
                             section))
    moved.write_text(hcp_text('[engine]\napi_base = "http://10.0.0.9:8000/v1"\n'
                              'api_key_env = "GPU_KEY"\nmax_retries = 0\n', section))
    run = tmp_path / "run"

    def eval_run(hcp: Path, engine: ScriptedEngine) -> None:
        assert main(["eval", "run", str(tmp_path / "suite"), "--hcp", str(hcp),
                     "--engine-url", engine.base_url, "--out", str(run)]) == 0

    with ScriptedEngine.serve(SCRIPT) as engine:
        eval_run(here, engine)
        first = rows(run)
        eval_run(moved, engine)  # the same behaviour, the engine elsewhere: kept
        assert rows(run) == first
    assert first["one"][2].startswith("models:")
    with ScriptedEngine.serve(SCRIPT, seed=1) as other:  # another model fingerprint
        eval_run(moved, other)
    again = rows(run)
    assert again["one"][0] > first["one"][0] and again["one"][2] != first["one"][2]
    assert again["one"][1] == first["one"][1]
