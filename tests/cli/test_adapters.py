"""``mol adapters`` and ``mol serve``'s registration at start, as a user runs them, against
the scripted engine loading LoRAs as vLLM and SGLang do."""

from __future__ import annotations

import hashlib
import json
import logging
import signal
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import httpx
import pytest

from mol.cli.commands.serve import register_loras
from mol.cli.main import main
from mol.hcp.loader import load
from mol.hcp.loras import content_sha256
from mol.runtime.testing import ScriptedEngine

SCRIPT = """
[[L0]]
constrained = true
times = -1
reply = "L2"
[[L2]]
times = -1
reply = "coded"
[[L0]]
constrained = false
times = -1
reply = "summary"
"""

HCP = """\
schema_version = 2
name = "loras"
[engine]
api_base = "http://127.0.0.1:9/v1"
lora_api = "{api}"
timeout_sec = 10
max_retries = 0
[router]
prompt = "Route."
[adapters.L0]
prompt = "You chat."
[adapters.L2]
prompt = "You code."
lora = {{ path = "l2.safetensors" }}
"""


def write(folder: Path, api: str = "vllm", weights: bytes = b"v1") -> Path:
    (folder / "l2.safetensors").write_bytes(weights)
    (folder / "a.toml").write_text(HCP.format(api=api))
    return folder / "a.toml"


def version(weights: bytes) -> str:
    return "L2@" + hashlib.sha256(weights).hexdigest()[:12]


def mol(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize(("api", "route"), [("vllm", "/v1/load_lora_adapter"),
                                            ("sglang", "/load_lora_adapter")])
def test_register_loads_the_missing_version_once(tmp_path, capsys, monkeypatch, api, route):
    hcp = write(tmp_path, api)
    with ScriptedEngine(SCRIPT, lora_api=api) as engine:
        monkeypatch.setenv("MOL_ENGINE_URL", engine.base_url)
        assert mol(capsys, "adapters", "register", "--hcp", str(hcp)) == (
            0, f"{version(b'v1')}: registered\n", "")
        assert mol(capsys, "adapters", "register", "--hcp", str(hcp), "L2") == (
            0, f"{version(b'v1')}: already registered\n", "")
    (request,) = engine.lora_requests
    assert request["path"] == route and request["body"] == {
        "lora_name": version(b"v1"), "lora_path": str(tmp_path / "l2.safetensors")}


def test_register_says_what_the_engine_refused(tmp_path, capsys, monkeypatch):
    hcp = write(tmp_path)
    with ScriptedEngine(SCRIPT, lora_api="vllm", runtime_lora_updating=False) as engine:
        monkeypatch.setenv("MOL_ENGINE_URL", engine.base_url)
        code, out, err = mol(capsys, "adapters", "register", "--hcp", str(hcp))
    assert (code, out) == (1, "")
    assert err == (f"error: the engine refused {version(b'v1')}: runtime LoRA updating is off: "
                   "start vLLM with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True\n")
    (tmp_path / "none").mkdir()
    none = write(tmp_path / "none", "none")
    code, _, err = mol(capsys, "adapters", "register", "--hcp", str(none))
    assert code == 2 and "engine.lora_api is 'none'" in err
    code, _, err = mol(capsys, "adapters", "register", "--hcp", str(hcp), "L0")
    assert code == 2 and "adapter 'L0' has no lora" in err


def test_a_turn_reaches_the_engine_under_the_versioned_name(tmp_path, capsys, monkeypatch):
    hcp = write(tmp_path)
    with ScriptedEngine(SCRIPT, lora_api="vllm") as engine:
        monkeypatch.setenv("MOL_ENGINE_URL", engine.base_url)
        # Not loaded yet: mol run refuses to start (the adapter check) ...
        code, _, err = mol(capsys, "run", "--hcp", str(hcp), "write code")
        assert code == 1 and f"{version(b'v1')} is not served (the engine serves L2: " \
            "register it with mol adapters register)" in err
        # ... and without the check the engine has no such model: the turn falls back to L0.
        assert mol(capsys, "run", "--hcp", str(hcp), "--no-engine-check",
                   "write code")[:2] == (0, "summary\n")
        assert mol(capsys, "adapters", "register", "--hcp", str(hcp))[0] == 0
        assert mol(capsys, "run", "--hcp", str(hcp), "write code") == (0, "coded\n", "")
    answered = [r for r in engine.requests if r["status"] == 200 and r["adapter"] == "L2"]
    assert answered and {r["body"]["model"] for r in answered} == {version(b"v1")}
    refused = next(r for r in engine.requests if r["status"] == 404)
    assert refused["error"] == f"The model `{version(b'v1')}` does not exist."


def test_a_new_lora_file_is_a_new_version_loaded_beside_the_old(tmp_path, capsys, monkeypatch):
    hcp = write(tmp_path)
    before = load(hcp)
    # served: the script's adapters only (not L0-L3 besides), the models it lists
    with ScriptedEngine(SCRIPT, lora_api="vllm", served=["L0", "L2"]) as engine:
        monkeypatch.setenv("MOL_ENGINE_URL", engine.base_url)
        assert mol(capsys, "adapters", "register", "--hcp", str(hcp))[0] == 0
        write(tmp_path, weights=b"v2")
        after = load(hcp)
        assert after.doc.engine_name("L2") == version(b"v2") != version(b"v1")
        assert after.digest != before.digest
        assert mol(capsys, "adapters", "register", "--hcp", str(hcp)) == (
            0, f"{version(b'v2')}: registered\n", "")
        assert set(engine.loaded_loras) == {version(b"v1"), version(b"v2")}
        code, out, _ = mol(capsys, "adapters", "list", "--hcp", str(hcp))
        listed = json.loads(mol(capsys, "adapters", "list", "--hcp", str(hcp), "--json")[1])
    sha = hashlib.sha256(b"v2").hexdigest()
    assert code == 0 and out == (
        "L0: L0 (served)\n"
        f"L2: {version(b'v2')} (served)\n"
        f"  lora {tmp_path / 'l2.safetensors'}\n"
        f"  sha256 {sha}\n"
        f"  other versions served: {version(b'v1')}\n"
        "engine models no adapter of loras: L2, scripted-base\n")
    assert listed["adapters"][1] == {
        "adapter": "L2", "engine_name": version(b"v2"),
        "lora_path": str(tmp_path / "l2.safetensors"), "sha256": sha, "served": True,
        "other_versions": [version(b"v1")]}
    assert listed["other_models"] == ["L2", "scripted-base"]


def test_unregister_stale_skips_a_version_in_use_and_unloads_an_idle_one(
        tmp_path, capsys, monkeypatch):
    hcp = write(tmp_path, weights=b"v3")
    busy, idle = version(b"v1"), version(b"v2")
    entered = threading.Event()
    with ScriptedEngine(SCRIPT, lora_api="vllm", latency=30,
                        on_request=lambda r: "path" not in r and entered.set()) as engine:
        monkeypatch.setenv("MOL_ENGINE_URL", engine.base_url)
        for name in (busy, idle):
            httpx.post(f"{engine.base_url}/load_lora_adapter",
                       json={"lora_name": name, "lora_path": str(tmp_path)}).raise_for_status()
        chat = threading.Thread(target=_ask, args=(engine.base_url, busy), daemon=True)
        chat.start()
        assert entered.wait(10)
        code, out, _ = mol(capsys, "adapters", "unregister", "--hcp", str(hcp), "--stale")
        loaded = set(engine.loaded_loras)
    chat.join(10)
    assert code == 0
    assert out == (f"{busy}: skipped, the engine reports requests running or waiting for it\n"
                   f"{idle}: unloaded\n")
    assert loaded == {busy}
    assert [r["body"] for r in engine.lora_requests[2:]] == [{"lora_name": idle}]


def _ask(base_url: str, model: str) -> None:
    try:
        httpx.post(f"{base_url}/chat/completions", timeout=60,
                   json={"model": model, "messages": [{"role": "user", "content": "x"}]})
    except httpx.HTTPError:
        pass  # the engine stops under it: the request only had to be in flight


def test_unregister_unloads_the_current_version(tmp_path, capsys, monkeypatch):
    hcp = write(tmp_path, "sglang")
    with ScriptedEngine(SCRIPT, lora_api="sglang") as engine:
        monkeypatch.setenv("MOL_ENGINE_URL", engine.base_url)
        mol(capsys, "adapters", "register", "--hcp", str(hcp))
        assert mol(capsys, "adapters", "unregister", "--hcp", str(hcp), "L2") == (
            0, f"{version(b'v1')}: unloaded\n", "")
        assert mol(capsys, "adapters", "unregister", "--hcp", str(hcp)) == (
            0, f"{version(b'v1')}: not registered\n", "")
    assert engine.loaded_loras == {}
    assert engine.lora_requests[-1]["path"] == "/unload_lora_adapter"


def test_hash_prints_mols_digest_of_a_file_or_folder(tmp_path, capsys):
    (tmp_path / "lora").mkdir()
    (tmp_path / "lora" / "adapter_config.json").write_text("{}")
    assert mol(capsys, "adapters", "hash", str(tmp_path / "lora")) == (
        0, content_sha256(tmp_path / "lora") + "\n", "")
    code, _, err = mol(capsys, "adapters", "hash", str(tmp_path / "none"))
    assert code == 2 and "no such file or folder" in err


def test_serve_registers_the_missing_loras_at_start(tmp_path, caplog):
    hcp = write(tmp_path)
    hcp.write_text(hcp.read_text().replace('lora_api = "vllm"',
                                           'lora_api = "vllm"\nregister_loras = true'))
    artifact = load(hcp)
    with ScriptedEngine(SCRIPT, lora_api="vllm") as engine, caplog.at_level(logging.INFO):
        anyio.run(register_loras, artifact, engine.base_url)
        anyio.run(register_loras, artifact, engine.base_url)
    assert list(engine.loaded_loras) == [version(b"v1")]
    assert [r.getMessage() for r in caplog.records if r.name == "mol.serve"] == [
        f"registered LoRA {version(b'v1')} with the engine"]


def test_mol_engine_scripted_loads_loras_as_the_dialect_says(tmp_path):
    script = tmp_path / "s.toml"
    script.write_text(SCRIPT)
    command = [sys.executable, "-m", "mol.cli", "engine", "scripted", "--script", str(script),
               "--port", "0", "--lora-api", "vllm", "--base", "qwen"]
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True) as proc:
        try:
            url = proc.stderr.readline().split(" at ")[1].split(",")[0].strip()
            load = httpx.post(f"{url}/load_lora_adapter",
                              json={"lora_name": "L2@0123456789ab", "lora_path": str(tmp_path)})
            models = httpx.get(f"{url}/models").json()["data"]
            progress = proc.stderr.readline()
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=15) == 0
        finally:
            proc.kill()
    assert load.text == "Success: LoRA adapter 'L2@0123456789ab' added successfully."
    assert models[-1] == {"id": "L2@0123456789ab", "object": "model", "created": 0,
                          "owned_by": "mol-scripted-engine", "root": str(tmp_path),
                          "parent": "qwen"}
    assert progress.strip() == "#1 /v1/load_lora_adapter L2@0123456789ab -> 200"
