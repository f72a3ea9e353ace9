"""Load: 200 concurrent chat completions all succeed; beyond the slots and the queue, 429."""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any

import anyio
import httpx
import pytest

from mol.core.tools import ToolContext
from mol.plugins import hookimpl
from mol.runtime.testing import ScriptedEngine
from mol.server.turns import runner

from .conftest import serve_app

SCRIPT = """
[[L0]]
constrained = true
times = -1
reply = "L3"
[[L3]]
when = "hold"
times = -1
delay = 3
reply = "held"
[[L3]]
times = -1
reply = "<Card/>"
[[L0]]
constrained = false
times = -1
reply = "summary"
"""


@pytest.mark.anyio
async def test_200_concurrent_chat_completions_all_succeed(tmp_path):
    async with ScriptedEngine.serve(SCRIPT, latency=0.05) as engine:
        with serve_app(tmp_path, engine.base_url, max_turns=256) as served:
            results: list[str] = []

            async def one(client, n: int) -> None:
                reply = await client.chat.completions.create(
                    model="mol", messages=[{"role": "user", "content": f"card {n}"}])
                results.append(reply.choices[0].message.content)

            with anyio.fail_after(120):
                async with served.async_client(timeout=90) as client, \
                        anyio.create_task_group() as group:
                    for n in range(200):
                        group.start_soon(one, client, n)
    assert results == ["<Card/>"] * 200


@pytest.mark.anyio
async def test_turns_beyond_the_limit_are_refused_quickly_with_retry_after(tmp_path):
    held = threading.Semaphore(0)

    def on_request(record) -> None:  # called in the engine's thread
        if record["adapter"] == "L3":
            held.release()

    async with ScriptedEngine.serve(SCRIPT, on_request=on_request) as engine:
        with serve_app(tmp_path, engine.base_url, max_turns=4, queue=0) as served:
            statuses: list[tuple[int, float, str | None]] = []
            headers = {"Authorization": f"Bearer {served.key}"}
            body = {"model": "mol", "messages": [{"role": "user", "content": "hold on"}]}

            async def one(client) -> None:
                answer = await client.post("/chat/completions", json=body, headers=headers)
                statuses.append((answer.status_code, time.monotonic(),
                                 answer.headers.get("retry-after")))

            with anyio.fail_after(60):
                async with httpx.AsyncClient(base_url=served.url, timeout=30) as client:
                    async with anyio.create_task_group() as group:
                        for _ in range(4):
                            group.start_soon(one, client)
                        # Wait until the four turns are held by the engine, then knock.
                        for _ in range(4):
                            await anyio.to_thread.run_sync(held.acquire)
                        for _ in range(16):
                            group.start_soon(one, client)
    refused = [s for s in statuses if s[0] == 429]
    assert sorted(s[0] for s in statuses) == [200] * 4 + [429] * 16
    # Refused at once: before any held turn (3 s in the engine) had its answer.
    first_answer = min(s[1] for s in statuses if s[0] == 200)
    assert all(s[1] < first_answer and s[2] == "1" for s in refused)


def test_a_turn_past_the_deadline_is_a_504_and_marked_interrupted(tmp_path):
    import contextlib
    import sqlite3

    with ScriptedEngine.serve(SCRIPT) as engine, \
            serve_app(tmp_path, engine.base_url, deadline=0.5) as served:
        answer = httpx.post(served.url + "/chat/completions", timeout=30,
                            headers={"Authorization": f"Bearer {served.key}"},
                            json={"model": "L3", "messages": [{"role": "user",
                                                               "content": "hold it"}]})
        assert answer.status_code == 504
        assert "exceeded the server's deadline of 0.5 s" in answer.json()["error"]["message"]
        with contextlib.closing(sqlite3.connect(served.store)) as db:
            rows = db.execute("SELECT status, user_text FROM turns").fetchall()
    assert rows == [("interrupted", "hold it")]


class Holder:
    """A tool holding a per-session resource (as the sandbox tools do) while it works."""

    def __init__(self) -> None:
        self.opened = 0
        self.holding = threading.Semaphore(0)
        """Released by each call once it holds its resource (in the server's thread)."""

    @hookimpl
    def mol_register_tools(self, register: Any) -> None:
        holder = self

        async def hold(text: str, context: ToolContext) -> str:
            """Hold the session's resource for a moment."""
            resource = await context.resources.get("held", holder.resource)
            holder.holding.release()
            await anyio.sleep(2.0)
            return "intact" if not resource.closed else "closed under me"

        register(hold)

    @asynccontextmanager
    async def resource(self) -> AsyncIterator[SimpleNamespace]:
        self.opened += 1
        state = SimpleNamespace(closed=False)
        try:
            yield state
        finally:
            state.closed = True


HOLD = """
[[L0]]
constrained = true
times = -1
reply = "L1"
[[L1]]
when = "^hold"
times = -1
tool_calls = [{ name = "hold", arguments = { text = "x" } }]
[[L1]]
when = "^intact$"
times = -1
reply = "kept"
[[L1]]
times = -1
reply = "lost"
[[L0]]
constrained = false
times = -1
reply = "summary"
"""


@pytest.mark.anyio
async def test_resources_in_use_are_never_closed_to_make_room(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "OPEN_RESOURCES", 2)  # 36 of 32 on the real server
    holder = Holder()
    async with ScriptedEngine.serve(HOLD) as engine:
        with serve_app(tmp_path, engine.base_url, extra_plugins=(("holder", holder),)) as served:
            answers: list[str] = []

            async def one(client, n: int) -> None:
                reply = await client.chat.completions.create(
                    model="mol", messages=[{"role": "user", "content": f"hold {n}"}])
                answers.append(reply.choices[0].message.content)

            with anyio.fail_after(120):
                async with served.async_client(timeout=90) as client, \
                        anyio.create_task_group() as group:
                    for n in range(2):
                        group.start_soon(one, client, n)
                    for _ in range(2):  # both hold their resource: now the others come
                        await anyio.to_thread.run_sync(holder.holding.acquire)
                    for n in range(2, 6):
                        group.start_soon(one, client, n)
    assert answers == ["kept"] * 6 and holder.opened == 6
