"""A new version of an adapter's LoRA is a new result: registered beside the old one under
its own engine name, it changes the artifact's digest, and ``mol eval run`` runs the tasks
again instead of reusing the results of the old weights."""

from __future__ import annotations

from pathlib import Path

import pytest

from mol.hcp.loader import load
from mol.runtime.testing import ScriptedEngine

from .conftest import HCP, SCRIPT, SUITE, mol

pytestmark = pytest.mark.docker


def test_a_new_lora_version_runs_again_where_the_old_results_stood(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    text = HCP.read_text().replace(
        "[adapters.L2]\n", '[adapters.L2]\nlora = { path = "l2.safetensors" }\n', 1)
    text = text.replace("[engine]\n", '[engine]\nlora_api = "vllm"\n', 1)
    hcp = tmp_path / "hcp.toml"
    hcp.write_text(text)
    weights = tmp_path / "l2.safetensors"
    weights.write_bytes(b"L2, first version")
    first = load(hcp)
    out = tmp_path / "run"
    with ScriptedEngine.serve(SCRIPT.read_text(), lora_api="vllm") as engine:
        def run(out: Path) -> tuple[int, str]:
            assert mol(capsys, "adapters", "register", "--hcp", hcp, "--engine-url",
                       engine.base_url)[0] == 0
            code, _, err = mol(capsys, "eval", "run", SUITE, "--hcp", hcp, "--engine-url",
                               engine.base_url, "--out", out, "--tasks", "csv*")
            return code, err

        assert "1 episode to run (1 task x 1 epoch, 0 stored)" in run(out)[1]
        assert "0 episodes to run (1 task x 1 epoch, 1 stored)" in run(out)[1]
        weights.write_bytes(b"L2, second version")
        second = load(hcp)
        assert second.digest != first.digest
        assert second.behaviour_digest != first.behaviour_digest
        # The old weights' results do not stand for the new ones: their folder is refused,
        # and a run of the new version runs the task.
        code, err = run(out)
        assert code == 1 and "holds another run (behaviour_digest" in err, err
        code, err = run(tmp_path / "second")
        assert code == 0 and "1 episode to run (1 task x 1 epoch, 0 stored)" in err, err
        # Both versions are loaded side by side; the turns reached each by its own name.
        names = {first.doc.engine_name("L2"), second.doc.engine_name("L2")}
        assert names <= set(engine.loaded_loras)
        models = {r["body"].get("model") for r in engine.requests
                  if isinstance(r["body"], dict)}
        answered = {m for m in models if isinstance(m, str) and m.startswith("L2@")}
        assert answered == names
