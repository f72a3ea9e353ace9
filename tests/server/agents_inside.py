"""Run inside a loopback-only network namespace: the scripted engine, ``mol serve`` (the real
CLI, ``python -m mol.cli``) and CLI agents' runs against it; what happened is written as JSON.

``python agents_inside.py PLAN.json``; the plan names the script, the artifact, the key
file, where to write the server's log and the outcome, and the runs: each an ``argv``, an
``env`` (nothing of this process's environment but ``PATH``), a ``cwd``, stdin text and a
timeout. ``{port}`` and ``{key}`` in a run's argv and env stand for the server's port and
key, known only in here. The outcome holds each run's exit code, stdout (as JSON events,
one per line, where it parses), stderr, the engine's request log, the server's exit code.
Used by ``test_codex.py`` (Codex CLI), ``test_claude_code.py`` (Claude Code) and
``test_claude_agent_sdk.py``; nothing here reaches past loopback (there is nothing else in
the namespace).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from mol.runtime.testing import ScriptedEngine


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_healthy(port: int, proc: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("mol serve exited before it was healthy")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError("mol serve did not become healthy")


def run(spec: dict, port: int, key: str) -> dict:
    """One run of a CLI agent against the server."""
    def filled(text: str) -> str:
        return text.replace("{port}", str(port)).replace("{key}", key)

    env = {"PATH": os.environ["PATH"], **{k: filled(v) for k, v in spec["env"].items()}}
    done = subprocess.run([filled(arg) for arg in spec["argv"]], env=env, cwd=spec.get("cwd"),
                          input=spec.get("stdin", ""), capture_output=True, text=True,
                          timeout=spec.get("timeout", 180), check=False)
    events = []
    for line in done.stdout.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            events.append({"unparsed": line})
    return {"rc": done.returncode, "events": events, "stdout": done.stdout[-6000:],
            "stderr": done.stderr[-6000:]}


def main(plan_path: str) -> None:
    plan = json.loads(Path(plan_path).read_text())
    port = free_port()
    key = Path(plan["key_file"]).read_text().strip()
    outcome: dict = {"runs": []}
    with ScriptedEngine.serve(Path(plan["script"])) as engine:
        env = {**os.environ, "MOL_API_KEY_FILE": plan["key_file"]}
        env.pop("MOL_ALLOW_UNAUTHENTICATED", None)
        with open(plan["server_log"], "wb") as log:
            server = subprocess.Popen(
                [sys.executable, "-m", "mol.cli", "serve", "--hcp", plan["hcp"], "--port",
                 str(port), "--engine-url", engine.base_url],
                stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            wait_healthy(port, server)
            for spec in plan["runs"]:
                outcome["runs"].append(run(spec, port, key))
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                outcome["server_rc"] = server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                outcome["server_rc"] = server.wait()
        outcome["requests"] = engine.requests
    Path(plan["out"]).write_text(json.dumps(outcome))


if __name__ == "__main__":
    main(sys.argv[1])
