"""Run inside a loopback-only network namespace: the scripted engine, ``mol serve`` (the
real CLI) and ``codex exec`` runs against it; what happened is written as JSON.

``python codex_inside.py PLAN.json``; the plan names the script, the artifact, the key
file, Codex's binary, home and work folder, the prompts, and where to write the outcome:
each run's exit code, JSON events and stderr, the engine's request log and the server's
log. Used by ``test_codex.py``; nothing here reaches past loopback (there is nothing
else in the namespace).
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


def codex(plan: dict, port: int, prompt: str) -> dict:
    """One ``codex exec`` run against the server, with Codex's default features."""
    provider = (f'{{name = "mol", base_url = "http://127.0.0.1:{port}/v1", '
                'env_key = "MOL_TEST_KEY", wire_api = "responses"}')
    command = [plan["codex"], "exec", "--json", "--skip-git-repo-check", "-C", plan["work"],
               "-c", "model_provider=mol", "-c", "model=mol",
               "-c", f"model_providers.mol={provider}",
               "-c", "check_for_update_on_startup=false", "-c", "analytics.enabled=false",
               "-c", "feedback.enabled=false", *plan.get("codex_args", []), prompt]
    env = {"PATH": os.environ["PATH"], "HOME": plan["home"],
           "CODEX_HOME": str(Path(plan["home"]) / ".codex"),
           "MOL_TEST_KEY": Path(plan["key_file"]).read_text().strip(), "TERM": "dumb",
           "NO_COLOR": "1"}
    done = subprocess.run(command, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=plan.get("timeout", 180), check=False)
    events = []
    for line in done.stdout.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            events.append({"unparsed": line})
    return {"rc": done.returncode, "events": events, "stderr": done.stderr[-6000:]}


def main(plan_path: str) -> None:
    plan = json.loads(Path(plan_path).read_text())
    Path(plan["home"], ".codex").mkdir(parents=True, exist_ok=True)
    port = free_port()
    outcome: dict = {"runs": []}
    with ScriptedEngine.serve(Path(plan["script"])) as engine:
        env = {**os.environ, "MOL_API_KEY_FILE": plan["key_file"]}
        env.pop("MOL_ALLOW_UNAUTHENTICATED", None)
        with open(plan["server_log"], "wb") as log:
            server = subprocess.Popen(
                ["mol", "serve", "--hcp", plan["hcp"], "--port", str(port), "--engine-url",
                 engine.base_url], stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            wait_healthy(port, server)
            for prompt in plan["prompts"]:
                outcome["runs"].append(codex(plan, port, prompt))
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
