"""A replica's hold on conversations (``mol.server.turns.leases``) on a real SQLite store:
turns of one replica queue, another replica's turn gets a 409 naming when to retry, and
leases of turns in flight are renewed."""

from __future__ import annotations

import anyio
import pytest

from mol.core.errors import SessionBusy
from mol.runtime.sessions import open_store
from mol.server.http.errors import api_error
from mol.server.turns import leases as leases_module
from mol.server.turns.leases import Leases

pytestmark = pytest.mark.anyio


async def test_another_replica_waits_a_moment_then_gets_a_409_with_retry_after(tmp_path,
                                                                              monkeypatch):
    monkeypatch.setattr(leases_module, "BUSY_WAIT", 0.2)
    async with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        here, there = Leases(store, ttl=30), Leases(store, ttl=30)
        await here.take("conv_a")
        with pytest.raises(SessionBusy) as raised:
            await there.take("conv_a")
        await there.take("conv_b")  # other conversations are free
        await here.give("conv_a")
        await there.take("conv_a")  # given back: free at once
    caught = api_error(raised.value)  # what the client is answered
    assert caught.status == 409 and caught.code == "conversation_busy"
    assert 25 <= int(caught.headers["Retry-After"]) <= 30


async def test_turns_of_one_replica_on_one_conversation_queue(tmp_path):
    order: list[str] = []
    async with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        leases = Leases(store)

        async def turn(name: str) -> None:
            await leases.take("conv_a")
            order.append(f"{name} in")
            await anyio.sleep(0.2)
            order.append(f"{name} out")
            await leases.give("conv_a")

        async with anyio.create_task_group() as group:
            group.start_soon(turn, "first")
            await anyio.sleep(0.05)
            group.start_soon(turn, "second")
    assert order == ["first in", "first out", "second in", "second out"]


async def test_a_held_lease_is_renewed_while_the_turn_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(leases_module, "BUSY_WAIT", 0)
    async with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        here, there = Leases(store, ttl=0.6), Leases(store, ttl=0.6)
        async with anyio.create_task_group() as group:
            group.start_soon(here.renew_forever)
            await here.take("conv_a")
            await anyio.sleep(1.5)  # well past one life of the lease
            with pytest.raises(SessionBusy):
                await there.take("conv_a")
            group.cancel_scope.cancel()
        await anyio.sleep(0.7)  # no longer renewed: it expires
        await there.take("conv_a")
