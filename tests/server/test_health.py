"""``GET /health``: the engine and the MCP servers, without auth and without details."""

from __future__ import annotations

import sys
import time

import httpx

from mol.runtime.testing import ScriptedEngine

from .conftest import serve_app

TIME_SERVER = f"""
[mcp_servers.time]
command = "{sys.executable}"
args = ["-m", "mcp_server_time", "--local-timezone", "UTC"]
startup_timeout_sec = 60
required = true
"""


def test_health_reports_the_engine_and_required_mcp_servers(tmp_path):
    with ScriptedEngine.serve("[[L0]]\nreply = 'x'\n") as engine, \
            serve_app(tmp_path, engine.base_url, extra=TIME_SERVER) as served:
        url = served.url.removesuffix("/v1") + "/health"
        health = httpx.get(url, timeout=10)
        deadline = time.monotonic() + 60
        while health.json()["mcp_servers"][0]["state"] == "starting":
            assert health.status_code == 503 and time.monotonic() < deadline
            time.sleep(0.1)
            health = httpx.get(url, timeout=10)
        assert health.status_code == 200
        assert health.json() == {
            "status": "ok", "engine": {"ok": True, "detail": "HTTP 200"},
            "mcp_servers": [{"name": "time", "state": "ready", "required": True}]}
    # Without an engine the server still answers, and says so.
    with serve_app(tmp_path, "http://127.0.0.1:9/v1") as served:
        health = httpx.get(served.url.removesuffix("/v1") + "/health", timeout=10)
        assert health.status_code == 503
        assert health.json()["engine"] == {"ok": False, "detail": "ConnectError"}


STARTED = """
import sys
from pathlib import Path

sys.path.insert(0, {root!r})
from tests.server.conftest import serve_app

with serve_app(Path({tmp!r}), "http://127.0.0.1:9/v1") as served:
    print("litellm" in sys.modules, flush=True)
"""


def test_litellm_is_imported_at_startup_not_by_the_first_turn(tmp_path):
    # Imported on the event loop by the first turn, it stalled every connection for seconds.
    import subprocess
    from pathlib import Path

    script = STARTED.format(root=str(Path(__file__).parents[2]), tmp=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"
