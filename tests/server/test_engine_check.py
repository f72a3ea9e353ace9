"""``mol serve`` checks that the engine serves the artifact's adapters before it starts;
``GET /health`` says ``not_ready`` while one is missing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

from mol.runtime.testing import ScriptedEngine

from .conftest import KEY, STARTED, free_port, write_hcp
from .processes import until

SCRIPT = "[[L0]]\nreply = 'hello'\n"


def serve_command(tmp_path: Path, engine_url: str, port: int, *flags: str) -> list[str]:
    return [sys.executable, "-m", "mol.cli", "serve", "--hcp", str(write_hcp(tmp_path)),
            "--port", str(port), "--engine-url", engine_url, *flags]


def environment(tmp_path: Path) -> dict[str, str]:
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    key_file.chmod(0o600)
    environ = {**os.environ, "MOL_API_KEY_FILE": str(key_file)}
    environ.pop("MOL_ALLOW_UNAUTHENTICATED", None)
    return environ


def test_serve_refuses_to_start_naming_the_missing_adapter(tmp_path: Path):
    with ScriptedEngine.serve(SCRIPT, served=["L0", "L1", "L2"]) as engine:
        out = subprocess.run(serve_command(tmp_path, engine.base_url, free_port()),
                             capture_output=True, text=True, env=environment(tmp_path),
                             timeout=120)
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr, out.stderr  # the error in its one line
    last = out.stderr.strip().splitlines()[-1]
    assert last == (f"error: the engine at {engine.base_url}/models does not serve the "
                    "artifact's adapters: L3 (engine name L3) is not served by the engine "
                    "(check with 'mol engine check'; --no-engine-check starts anyway)")


def test_without_the_check_it_starts_and_health_is_not_ready_until_served(tmp_path: Path):
    with ScriptedEngine.serve(SCRIPT, served=["L0", "L1", "L2"]) as engine:
        port = free_port()
        proc = subprocess.Popen(serve_command(tmp_path, engine.base_url, port,
                                              "--no-engine-check"),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env=environment(tmp_path))
        STARTED.append(proc)
        url = f"http://127.0.0.1:{port}/health"

        def answered() -> httpx.Response | None:
            assert proc.poll() is None, "mol serve exited"
            try:
                return httpx.get(url, timeout=5)
            except httpx.HTTPError:
                return None

        until(answered, 60)
        health = answered()
        assert health is not None and health.status_code == 503
        assert health.json()["status"] == "not_ready"
        assert health.json()["engine"] == {"ok": False, "detail": "not_ready: L3",
                                           "missing": ["L3"]}
        engine.served.append("L3")  # the engine loads it: ready at the next call
        health = answered()
        assert health is not None and health.status_code == 200
        assert health.json()["status"] == "ok"
        assert health.json()["engine"] == {"ok": True, "detail": "HTTP 200"}
        proc.terminate()
        assert proc.wait(timeout=30) == 0
