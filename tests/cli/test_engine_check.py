"""``mol engine check`` and the adapter check at the start of ``mol run``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mol.runtime.testing import ScriptedEngine

from .conftest import BASE_HCP

SCRIPT = """
[[L0]]
constrained = true
reply = "L0"
[[L0]]
constrained = false
reply = "hello there"
"""


def mol(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    # This interpreter's mol (the code under test), not whichever `mol` PATH finds.
    return subprocess.run([sys.executable, "-m", "mol.cli", *args], capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=120)


def write(tmp_path: Path, extra: str = "") -> Path:
    hcp = tmp_path / "t.toml"
    hcp.write_text(BASE_HCP.format(constraint="structured_outputs", timeout=30) + extra)
    return hcp


def test_check_prints_one_line_per_adapter(tmp_path: Path):
    hcp = write(tmp_path)
    with ScriptedEngine.serve(SCRIPT) as engine:
        out = mol("engine", "check", "--hcp", str(hcp), "--engine-url", engine.base_url)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"ok       L{n} (engine name L{n})" for n in range(4)]
    with ScriptedEngine.serve(SCRIPT, served=["L0", "L1", "L2"]) as engine:
        out = mol("engine", "check", "--hcp", str(hcp),
                  env={"MOL_ENGINE_URL": engine.base_url})
    assert out.returncode == 1
    assert out.stdout.splitlines()[3] == "missing  L3 (engine name L3) is not served by the engine"
    assert out.stdout.splitlines()[:3] == [f"ok       L{n} (engine name L{n})" for n in range(3)]
    out = mol("engine", "check", "--hcp", str(hcp), "--engine-url", "http://127.0.0.1:9/v1")
    assert out.returncode == 1
    assert out.stderr.startswith("error: the engine's model list GET "
                                 "http://127.0.0.1:9/v1/models got no answer")


LORA_HCP = """\
schema_version = 2
name = "based"
[engine]
api_base = "http://127.0.0.1:9/v1"
lora_api = "vllm"
[model]
base = "Qwen3-8B"
[router]
prompt = "Route."
[adapters.L0]
prompt = "You chat."
[adapters.L2]
prompt = "You code."
lora = { path = "l2.safetensors" }
"""


def test_a_lora_on_another_base_is_foreign(tmp_path: Path):
    """The engine lists a loaded LoRA with its base as ``parent`` (vLLM's model card)."""
    (tmp_path / "l2.safetensors").write_bytes(b"weights")
    hcp = tmp_path / "based.toml"
    hcp.write_text(LORA_HCP)
    for base, code in (("meta-llama/Llama-3.1-8B", 1), ("Qwen/Qwen3-8B", 0)):
        with ScriptedEngine.serve(SCRIPT, lora_api="vllm", base=base) as engine:
            url = ["--engine-url", engine.base_url]
            assert mol("adapters", "register", "--hcp", str(hcp), *url).returncode == 0
            out = mol("engine", "check", "--hcp", str(hcp), *url)
        assert out.returncode == code, out.stderr
        lines = out.stdout.splitlines()
        assert lines[0] == "ok       L0 (engine name L0)"
        name = lines[1].split("engine name ")[1].split(")")[0]
        assert name.startswith("L2@") and len(name) == 15
        assert lines[1] == (f"ok       L2 (engine name {name})" if code == 0 else
                            f"foreign  L2 (engine name {name}) is foreign: the engine serves "
                            f"it on base {base!r}, not the artifact's [model] base 'Qwen3-8B'")


def test_run_refuses_an_engine_missing_an_adapter_unless_told_not_to_check(tmp_path: Path):
    hcp = write(tmp_path)
    with ScriptedEngine.serve(SCRIPT, served=["L0", "L1", "L2"]) as engine:
        out = mol("run", "--hcp", str(hcp), "--engine-url", engine.base_url, "hi")
        assert out.returncode == 1 and out.stdout == ""
        assert out.stderr.strip() == (
            f"error: the engine at {engine.base_url}/models does not serve the artifact's "
            "adapters: L3 (engine name L3) is not served by the engine (check with "
            "'mol engine check'; --no-engine-check starts anyway)")
        assert engine.requests == []  # refused before any turn
        out = mol("run", "--hcp", str(hcp), "--engine-url", engine.base_url,
                  "--no-engine-check", "hi")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "hello there\n"
