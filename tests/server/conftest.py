"""A real ``mol serve`` app on uvicorn (in a thread) against the scripted engine."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from mol.hcp.loader import load
from mol.plugins import hookimpl
from mol.plugins.manager import PluginManager

from ..conftest import browse, hcp_text

__all__ = ["browse"]

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

KEY = "sk-test-canary-7f3c9d2e1b"

STARTED: list[subprocess.Popen] = []
"""``mol serve`` processes a test started (``processes.Server``): killed after it."""


@pytest.fixture(autouse=True)
def no_server_left() -> Iterator[None]:
    """A failing test must not leave a ``mol serve`` process behind."""
    yield
    while STARTED:
        proc = STARTED.pop()
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)

HCP = hcp_text("""\
[engine]
api_base = "http://127.0.0.1:9/v1"
routing_constraint = "structured_outputs"
timeout_sec = 30
max_retries = 2
[adapters.L0]
prompt = "You chat."
[adapters.L1]
prompt = "You act."
tools.allow = ["shout", "hold"]
[adapters.L2]
prompt = "You code."
[adapters.L3]
prompt = "You draw."
[server]
expose_adapters = true
[session]
store = "sqlite:///{store}"
""", name="served")


WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
"""A client tool (Chat Completions shape) the scripted L1 calls as ``get_weather``."""


def answers(engine: Any, adapter: str) -> list[dict[str, Any]]:
    """The bodies of ``adapter``'s answer requests to the scripted engine (no route, no
    summary requests), oldest first."""
    return [r["body"] for r in engine.requests_for(adapter) if "structured_outputs" not in
            r["body"] and not r["body"]["messages"][-1]["content"].startswith("User: ")]


class Shout:
    """A runtime tool that runs server-side."""

    @hookimpl
    def mol_register_tools(self, register: Any) -> None:
        def shout(text: str) -> str:
            """Say it louder."""
            return text.upper()

        register(shout)


def write_hcp(tmp_path: Path, extra: str = "", hcp: str = HCP) -> Path:
    """The artifact served: ``hcp`` (a format string with ``{store}``) and ``extra``."""
    path = tmp_path / "served.toml"
    path.write_text(hcp.format(store=tmp_path / "sessions.db") + extra)
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Served:
    """A running server: its base URL, key and store path."""

    def __init__(self, url: str, key: str, store: Path, server: Any) -> None:
        self.url, self.key, self.store, self.server = url, key, store, server
        self._client: Any = None
        self._clients: list[Any] = []

    def client(self) -> Any:
        """The sync openai client (one per server, closed with it)."""
        import openai

        if self._client is None:
            self._client = openai.OpenAI(base_url=self.url, api_key=self.key, max_retries=0)
        return self._client

    def anthropic(self, **options: Any) -> Any:
        """A sync anthropic client of this server (closed with it: a client left to the
        garbage collector may have its pooled sockets finalized first, an unclosed-socket
        warning in whichever test happens to be running)."""
        import anthropic

        options.setdefault("api_key", self.key)
        client = anthropic.Anthropic(base_url=self.url.removesuffix("/v1"), max_retries=0,
                                     **options)
        self._clients.append(client)
        return client

    def close(self) -> None:
        for client in [self._client, *self._clients]:
            if client is not None:
                client.close()

    def async_client(self, **kwargs: Any) -> Any:
        import openai

        return openai.AsyncOpenAI(base_url=self.url, api_key=self.key, max_retries=0, **kwargs)


@contextmanager
def serve_app(tmp_path: Path, engine_url: str, key: str | None = KEY, extra: str = "",
              hcp: str = HCP, extra_plugins: tuple[tuple[str, Any], ...] = (),
              wrap: Any = None, **options: Any) -> Iterator[Served]:
    """Run the app on uvicorn in a thread on loopback until the block ends (plugins: the
    ``shout`` one and ``extra_plugins``; ``wrap``: an ASGI middleware around the app)."""
    import uvicorn

    from mol.server import ServerConfig, create_app
    from mol.server.http.transport import uvicorn_config

    artifact = load(write_hcp(tmp_path, extra, hcp))
    store = tmp_path / "sessions.db"
    plugins = PluginManager(None, builtin=(), extra=[("shout", Shout()), *extra_plugins])
    config = ServerConfig(artifact=artifact, store_path=str(store),
                          api_key=key.encode() if key else None, engine_url=engine_url,
                          plugins=plugins, **options)
    port = free_port()
    app = create_app(config)
    server = uvicorn.Server(uvicorn_config(wrap(app) if wrap else app, config, "127.0.0.1", port,
                                           log_level="warning", timeout_graceful_shutdown=5,
                                           # uvloop (when installed) cannot close a loop
                                           # cleanly outside the main thread.
                                           loop="asyncio"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the server did not start")
        time.sleep(0.02)
    served = Served(f"http://127.0.0.1:{port}/v1", key or "", store, server)
    try:
        yield served
    finally:
        served.close()
        server.should_exit = True
        thread.join(timeout=15)


@pytest.fixture
def hcp_path(tmp_path: Path) -> Path:
    return write_hcp(tmp_path)


def transcript_problems(requests: list[dict[str, Any]]) -> list[str]:
    """Every engine request in ``requests`` (the scripted engine's log) whose messages break
    the Chat Completions tool-call contract: an assistant tool-call message must be followed
    by exactly its results (each once) before any other message, and every tool message
    must answer a call still open. Written apart from mol's own check, so one cannot hide
    a mistake of the other."""
    problems = []
    for record in requests:
        body = record.get("body")
        if not isinstance(body, dict):
            continue
        open_ids: set[str] = set()
        for i, message in enumerate(body.get("messages") or []):
            where = f"request #{record['seq']} ({record['adapter']}) message {i}"
            if message.get("role") == "tool":
                if message.get("tool_call_id") not in open_ids:
                    problems.append(f"{where}: a result for {message.get('tool_call_id')!r}, "
                                    "which no open call asked for")
                open_ids.discard(message.get("tool_call_id"))
                continue
            if open_ids:
                problems.append(f"{where}: {sorted(open_ids)} left without results")
            open_ids = {call["id"] for call in message.get("tool_calls") or []}
        if open_ids:
            problems.append(f"request #{record['seq']} ({record['adapter']}) ends with "
                            f"{sorted(open_ids)} unanswered")
    return problems


INSIDE = Path(__file__).with_name("agents_inside.py")
NPM_CACHE = Path(os.environ.get("MOL_TEST_NPM_CACHE",
                                Path.home() / ".cache" / "mol-tests" / "npm"))
"""Where the npm packages the tests run are cached (tests/services.py pins them)."""


def npm_bin(package: str, command: str) -> Path:
    """``command`` of the npm ``package`` (``name@version``), installed into the cache once
    per machine (with its native binary) the way ./test installs it."""
    launcher = NPM_CACHE / "node_modules" / ".bin" / command
    name, _, version = package.rpartition("@")
    manifest = NPM_CACHE / "node_modules" / name / "package.json"
    if not launcher.exists() or json.loads(manifest.read_text())["version"] != version:
        NPM_CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix",
                        str(NPM_CACHE), package], check=True, capture_output=True, timeout=900)
    return launcher


def run_inside(tmp_path: Path, script: str, runs: list[dict], extra: str = "") -> dict:
    """The scripted engine (``script``), ``mol serve`` (the test artifact plus ``extra``) and
    ``runs`` (see ``agents_inside.py``), all in a loopback-only network namespace; their
    outcome, with the server's log."""
    key = tmp_path / "key"
    key.write_text(KEY + "\n")
    key.chmod(0o600)
    (tmp_path / "script.toml").write_text(script)
    plan = {"script": str(tmp_path / "script.toml"), "hcp": str(write_hcp(tmp_path, extra)),
            "key_file": str(key), "server_log": str(tmp_path / "server.log"),
            "out": str(tmp_path / "out.json"), "runs": runs}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    done = subprocess.run(
        ["unshare", "--net", "--", "sh", "-c",
         f'ip link set lo up && exec "{sys.executable}" "{INSIDE}" "{tmp_path / "plan.json"}"'],
        capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    outcome = json.loads((tmp_path / "out.json").read_text())
    outcome["server_log"] = (tmp_path / "server.log").read_text()
    return outcome


def settled_turns(store, pattern: str, count: int, timeout: float = 30) -> list[tuple]:
    """``(session, index, status, adapter, summary)`` of the stored turns whose user text is
    like ``pattern``, once ``count`` of them are settled (the summary hop runs after the
    reply has gone out)."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.closing(sqlite3.connect(store)) as db:
            rows = db.execute("SELECT session_id, idx, status, adapter, summary FROM turns "
                              "WHERE user_text LIKE ? ORDER BY idx", (pattern,)).fetchall()
        if len(rows) >= count and all(row[2] != "running" for row in rows):
            return rows
        if time.monotonic() > deadline:
            return rows
        time.sleep(0.05)


def tool_results(engine: Any, adapter: str = "L1") -> list[str]:
    """The tool results ``adapter`` read (the last message of its requests to the scripted
    engine, when a tool's), in order."""
    return [r["body"]["messages"][-1]["content"] for r in engine.requests_for(adapter)
            if r["body"]["messages"][-1]["role"] == "tool"]


def turn_events(store: Path, user_text: str) -> list[dict[str, Any]]:
    """The recorded events of the one turn whose user text is ``user_text``, once settled."""
    settled_turns(store, user_text, 1)
    with contextlib.closing(sqlite3.connect(store)) as db:
        [(events,)] = db.execute("SELECT events FROM turns WHERE user_text = ?",
                                 (user_text,)).fetchall()
    return json.loads(events)


def chat_tool_call(client: Any, text: str, tool: dict[str, Any], stream: bool = False
                   ) -> tuple[list[dict[str, Any]], str, str, str]:
    """A chat completion of the user message ``text`` (``tool`` declared) that ends with one
    tool call: the history after it, and the call's id, name and arguments (streamed: put
    together from its chunks)."""
    messages = [{"role": "user", "content": text}]
    if not stream:
        reply = client.chat.completions.create(model="mol", messages=messages, tools=[tool])
        assert reply.choices[0].finish_reason == "tool_calls"
        [call] = reply.choices[0].message.tool_calls
        message = reply.choices[0].message.model_dump(exclude_none=True)
        return [*messages, message], call.id, call.function.name, call.function.arguments
    calls: dict[int, dict[str, str]] = {}
    finish = None
    for chunk in client.chat.completions.create(model="mol", messages=messages, tools=[tool],
                                                stream=True):
        for delta in chunk.choices[0].delta.tool_calls or []:
            call = calls.setdefault(delta.index, {"arguments": ""})
            call["id"] = delta.id or call.get("id", "")
            call["name"] = delta.function.name or call.get("name", "")
            call["arguments"] += delta.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert finish == "tool_calls"
    [call] = calls.values()
    message = {"role": "assistant", "content": None, "tool_calls": [{
        "id": call["id"], "type": "function",
        "function": {"name": call["name"], "arguments": call["arguments"]}}]}
    return [*messages, message], call["id"], call["name"], call["arguments"]


def sdk_stream_event(data: dict[str, Any]) -> str:
    """The type of a Responses stream event, after checking it against the openai SDK's own
    definition (``ResponseStreamEvent``): a type the SDK defines, and every field its model
    of that type requires. mol writes the events by hand; this is where they meet the SDK."""
    import typing

    from openai.types.responses import ResponseStreamEvent

    union = typing.get_args(ResponseStreamEvent)[0]
    models = {typing.get_args(m.model_fields["type"].annotation)[0]: m
              for m in typing.get_args(union)}
    assert data.get("type") in models, f"{data.get('type')!r} is no event the SDK defines"
    models[data["type"]].model_validate(data)
    return data["type"]

