"""``mol engine check`` and the adapter check at the start of ``mol run``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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


@contextmanager
def vllm_models(data: list[dict]) -> Iterator[str]:
    """A stand-in answering ``GET /v1/models`` with ``data``, as vLLM lists LoRAs."""

    class Models(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # http.server calls it by this name
            body = json.dumps({"object": "list", "data": data}).encode()
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Models)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_a_lora_on_another_base_is_foreign(tmp_path: Path):
    hcp = write(tmp_path, '[model]\nbase = "Qwen3-8B"\n')
    base = {"id": "Qwen/Qwen3-8B", "object": "model", "root": "/models/Qwen3-8B",
            "parent": None, "max_model_len": 32768}
    loras = [{"id": f"L{n}", "object": "model", "root": f"/loras/L{n}",
              "parent": "Qwen/Qwen3-8B" if n != 2 else "meta-llama/Llama-3.1-8B"}
             for n in range(4)]
    with vllm_models([base, *loras]) as url:
        out = mol("engine", "check", "--hcp", str(hcp), "--engine-url", url)
        assert out.returncode == 1
        assert out.stdout.splitlines()[2] == (
            "foreign  L2 (engine name L2) is foreign: the engine serves it on base "
            "'meta-llama/Llama-3.1-8B', not the artifact's [model] base 'Qwen3-8B'")
        assert [line.split()[0] for line in out.stdout.splitlines()] == ["ok", "ok",
                                                                          "foreign", "ok"]
        loras[2]["parent"] = "Qwen/Qwen3-8B"
        assert mol("engine", "check", "--hcp", str(hcp), "--engine-url", url).returncode == 0


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
