"""Admission: a fixed number of turn slots and a bounded FIFO queue in front of them; what
exceeds the queue, or waits too long, is a 429 with ``Retry-After``. Through the server, a
burst beyond the slots waits and is served; a client that hangs up mid-stream is one log
line, without a traceback."""

from __future__ import annotations

import logging

import anyio
import httpx
import pytest

from mol.core.errors import Overloaded
from mol.runtime.testing import ScriptedEngine
from mol.server.http.errors import api_error
from mol.server.turns.admission import Admission

from .conftest import serve_app


@pytest.mark.anyio
async def test_waiters_get_slots_in_arrival_order():
    admission = Admission(slots=1, queue=3, wait=10)
    await admission.enter()
    order: list[int] = []

    async def waiter(n: int) -> None:
        await admission.enter()
        order.append(n)
        admission.leave()

    async with anyio.create_task_group() as group:
        for n in range(3):
            group.start_soon(waiter, n)
            await anyio.wait_all_tasks_blocked()
        assert admission.waiting == 3
        with pytest.raises(Overloaded) as raised:  # the queue is full
            await admission.enter()
        caught = api_error(raised.value)  # what the client is answered
        assert caught.status == 429 and "Retry-After" in caught.headers
        admission.leave()
    assert order == [0, 1, 2]
    assert (admission.running, admission.waiting) == (0, 0)


@pytest.mark.anyio
async def test_a_wait_that_runs_out_is_refused_and_leaves_the_line():
    admission = Admission(slots=1, queue=5, wait=0.2)
    await admission.enter()
    with pytest.raises(Overloaded) as raised:
        await admission.enter()
    caught = api_error(raised.value)  # what the client is answered
    assert caught.status == 429 and "within 0.2 s" in caught.message
    assert admission.waiting == 0
    admission.leave()
    await admission.enter()  # the slot went back to the pool, not to the one who gave up
    assert admission.running == 1


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
delay = 0.4
times = -1
reply = "Served after waiting my turn."
"""


@pytest.mark.anyio
async def test_a_burst_beyond_the_slots_queues_and_is_served(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="mol.server")
    async with ScriptedEngine.serve(SCRIPT) as engine:
        with serve_app(tmp_path, engine.base_url, max_turns=1, queue=8, queue_wait=60) as served:
            headers = {"Authorization": f"Bearer {served.key}"}
            statuses: list[int] = []

            async def one(client: httpx.AsyncClient, n: int) -> None:
                answer = await client.post("/chat/completions", headers=headers, json={
                    "model": "mol", "messages": [{"role": "user", "content": f"turn {n}"}]})
                statuses.append(answer.status_code)

            with anyio.fail_after(60):
                async with httpx.AsyncClient(base_url=served.url, timeout=60) as client:
                    async with anyio.create_task_group() as group:
                        for n in range(4):
                            group.start_soon(one, client, n)
                    # A stream the client drops after its first chunk.
                    async with client.stream("POST", "/chat/completions", headers=headers,
                                             json={"model": "mol", "stream": True,
                                                   "messages": [{"role": "user",
                                                                 "content": "dropped"}]}) as s:
                        async for _ in s.aiter_lines():
                            break
                    await anyio.sleep(1.5)
    assert statuses == [200] * 4
    gone = [r for r in caplog.records if "went away mid-stream" in r.getMessage()]
    assert len(gone) == 1 and gone[0].exc_info is None
    assert not [r for r in caplog.records if r.exc_info]
