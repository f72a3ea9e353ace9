"""The walk of one Chat Completions turn with one tool call through ``mol serve``.

A real app (``mol.server.create_app``) in front of the scripted engine serves one warm-up
turn, then the measured one: routed to L1, which calls a server-side tool (``shout``)
and answers. Every call into a function of mol's code folders during that request (and
the turn's bookkeeping after it) is traced, and the walk is reported as:

- ``files``: the source files the turn visits (a function of theirs runs);
- ``hops``: distinct caller file -> callee file pairs;
- ``reentrant_calls``: calls into a file that is already on the call stack below the
  caller (a callback climbing back: ``loop`` -> ``harness`` -> ``loop``), and
  ``reentrant_pairs``, the distinct pairs they take.

The order of first visits is printed: docs/architecture.md walks it. Ends with one JSON
line, as the other benchmarks do.

    python bench/turn_walk.py
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ROOT = Path(__file__).resolve().parents[1]
CODE = [ROOT / name for name in ("core", "skills", "hcp", "sandboxes", "genui", "plugins",
                                 "runtime", "eval", "server", "cli")]

SCRIPT = """
[[L0]]
constrained = true
times = -1
reply = "L1"
[[L0]]
constrained = false
times = -1
reply = "summary"
[[L1]]
when = "^shout it$"
times = -1
tool_calls = [{ name = "shout", arguments = { text = "hello" } }]
[[L1]]
when = "^HELLO$"
times = -1
reply = "I shouted."
[[L1]]
times = -1
reply = "warm."
"""

HCP = """schema_version = 1
name = "walk"
[router]
prompt = "Route."
[engine]
api_base = "http://127.0.0.1:9/v1"
routing_constraint = "structured_outputs"
[adapters.L0]
prompt = "You chat."
[adapters.L1]
prompt = "You act."
tools.allow = ["shout"]
[adapters.L2]
prompt = "You code."
[adapters.L3]
prompt = "You draw."
[session]
store = "sqlite:///{store}"
"""


class Walk:
    """A ``sys.settrace`` tracer recording calls into mol's code folders."""

    def __init__(self) -> None:
        self.files: list[str] = []
        self.pairs: set[tuple[str, str]] = set()
        self.reentrant: list[tuple[str, str]] = []

    @staticmethod
    def _ours(filename: str) -> str | None:
        path = Path(filename)
        return (str(path.relative_to(ROOT)) if any(path.is_relative_to(c) for c in CODE)
                else None)

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event != "call":
            return
        here = self._ours(frame.f_code.co_filename)
        if here is None:
            return
        stack = []
        back = frame.f_back
        while back is not None:
            caller = self._ours(back.f_code.co_filename)
            if caller is not None:
                stack.append(caller)
            back = back.f_back
        self.files.append(here)
        if stack and stack[0] != here:
            self.pairs.add((stack[0], here))
            if here in stack[1:]:
                self.reentrant.append((stack[0], here))

    def report(self) -> dict[str, Any]:
        first = list(dict.fromkeys(self.files))
        return {"benchmark": "turn_walk", "files": len(first), "hops": len(self.pairs),
                "reentrant_calls": len(self.reentrant),
                "reentrant_pairs": len(set(self.reentrant)), "order": first,
                "reentrant": sorted(" -> ".join(p) for p in set(self.reentrant))}


async def walk() -> dict[str, Any]:
    import httpx

    from mol.hcp.loader import load
    from mol.plugins import hookimpl
    from mol.plugins.manager import PluginManager
    from mol.runtime.testing import ScriptedEngine
    from mol.server import ServerConfig, create_app

    class Shout:
        @hookimpl
        def mol_register_tools(self, register: Any) -> None:
            def shout(text: str) -> str:
                """Say it louder."""
                return text.upper()

            register(shout)

    folder = Path(tempfile.mkdtemp())
    (folder / "walk.toml").write_text(HCP.format(store=folder / "sessions.db"))
    async with ScriptedEngine.serve(SCRIPT) as engine:
        config = ServerConfig(artifact=load(folder / "walk.toml"),
                              store_path=str(folder / "sessions.db"), api_key=b"key",
                              engine_url=engine.base_url,
                              plugins=PluginManager(None, builtin=(), extra=[("s", Shout())]))
        app = create_app(config)
        inner = app
        while not hasattr(inner, "router"):  # through the middlewares, to run the lifespan
            inner = inner.app
        headers = {"Authorization": "Bearer key"}
        async with inner.router.lifespan_context(inner), httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://walk") as client:

            async def ask(text: str) -> dict[str, Any]:
                reply = await client.post("/v1/chat/completions", headers=headers, json={
                    "model": "mol", "messages": [{"role": "user", "content": text}]})
                assert reply.status_code == 200, reply.text
                return reply.json()

            await ask("warm up")
            await asyncio.sleep(0.5)  # the warm-up turn's summary hop
            tracer = Walk()
            threading.settrace(tracer)
            sys.settrace(tracer)
            try:
                answered = await ask("shout it")
                await asyncio.sleep(1.0)  # the turn's summary hop and last checkpoint
            finally:
                sys.settrace(None)
                threading.settrace(None)  # type: ignore[arg-type]
    assert answered["choices"][0]["message"]["content"] == "I shouted.", answered
    return tracer.report()


def main() -> None:
    result = asyncio.run(walk())
    print("the turn visits, in order:", " > ".join(result["order"]))
    print("calls back into a file already on the stack:", ", ".join(result["reentrant"]))
    print(json.dumps({k: v for k, v in result.items() if k not in ("order", "reentrant")}))


if __name__ == "__main__":
    main()
