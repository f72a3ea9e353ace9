"""The runner's Ray backend (``mol eval run --ray``): each episode is one Ray task on a node.

A task runs the whole episode (sandbox, agent loop, verifier) on a node that advertises a
``mol_sandbox_slot``, next to the Docker engine that holds its container, so only the
model calls cross the network during the episode; the driver keeps the results store and
writes each result the moment it comes back, exactly as a local run does.

- The HCP snapshot and each task folder are put into the cluster once; a node fetches each
  once (``mol.eval.cluster.payload`` says what travels).
- A task lost with its node (or its worker process) is submitted again, at most
  ``node_retries`` more times, on whichever node has a free slot; after that the episode
  is an ``error`` with reason ``node_lost``. An episode also counts as lost when no live
  node has advertised a slot for ``GRACE`` seconds: a run never hangs on a cluster that
  emptied.
- The engine URL is resolved on the driver (``--engine-url``, ``MOL_ENGINE_URL``, the
  HCP's ``api_base``; an embedded engine is started here) and sent as it is: with nodes
  on other machines it must not be a loopback address, and the run says so.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from typing import Any
from urllib.parse import urlsplit

import anyio

from mol.core import __version__
from mol.core.errors import ClusterError, NodeLost
from mol.core.hosts import loopback_host
from mol.eval.cluster.payload import Spec, failed, task_tree, unpack
from mol.eval.progress import Progress
from mol.eval.store import Episode
from mol.eval.tasks import Task

GRACE = 60.0
"""Seconds without any live node advertising a slot before waiting episodes are lost."""
POLL = 5.0
"""Seconds between looks at the cluster's slots while episodes wait."""

@asynccontextmanager
async def ray_episodes(options: Any, todo: list[tuple[Task, int]],
                       progress: Progress, model: str = ""
                       ) -> AsyncIterator[Callable[[Task, int], Awaitable[Episode]]]:
    """A function running one episode on the cluster ``options.ray`` names, while open
    (``model``: the engine's model fingerprint the results are keyed by)."""
    from mol.eval.cluster.ray_backend import Cluster
    from mol.hcp.snapshot import entries

    async with AsyncExitStack() as stack:
        url = await _engine_url(options, stack)
        cluster = await anyio.to_thread.run_sync(partial(
            Cluster.connect, options.ray, slots=max(options.jobs, 1)))
        stack.push_async_callback(anyio.to_thread.run_sync, cluster.close)
        await _describe(cluster, url, progress)
        hcp = cluster.put(entries(options.artifact))
        trees = {task.name: cluster.put(task_tree(task)) for task, _ in todo}
        watch = _Watch(cluster)

        async def run(task: Task, epoch: int) -> Episode:
            spec = Spec(task.name, task.digest, epoch, options.artifact.digest, options.agent,
                        options.adapter, url, options.record, __version__,
                        options.artifact.behaviour_digest, model)
            return await _attempts(cluster, spec, (hcp, trees[task.name]), watch, progress,
                                   options.node_retries)

        yield run


async def _attempts(cluster: Any, spec: Spec, objects: tuple[Any, Any], watch: _Watch,
                    progress: Progress, retries: int) -> Episode:
    """Run ``spec`` until a node answers, at most ``retries`` more times after a loss."""
    started = time.time()
    attempt = 1
    while True:
        try:
            result = await _answer(cluster.submit(spec, *objects), watch)
        except NodeLost as exc:
            if attempt > retries:
                tried = f"{attempt} attempt{'s' * (attempt != 1)}"
                return failed(spec, "node_lost", f"node lost: {exc} ({tried})", started)
            attempt += 1
            progress.note(f"{spec.task} #{spec.epoch}: node lost ({exc}); running it again "
                          f"on another node (attempt {attempt} of {retries + 1})")
            continue
        except ClusterError as exc:
            return failed(spec, "internal", str(exc), started)
        episode, notes = unpack(result)
        for note in notes:
            progress.note(f"{episode.placement.removeprefix('ray:')}: {note}")
        return episode


async def _answer(pending: Any, watch: _Watch) -> Any:
    """The task's result; ``NodeLost`` if the cluster has had no slot for ``GRACE`` s."""
    try:
        while True:
            with anyio.move_on_after(POLL):
                return await pending.result()
            if not await watch.alive():
                raise NodeLost(f"no live node has advertised a sandbox slot for {GRACE:g} s")
    except BaseException:
        pending.cancel()  # cancelled or failed: the node's worker need not go on
        raise


class _Watch:
    """Whether some live node advertises a slot, looked up at most every ``POLL`` s."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.seen = self.looked = time.monotonic()

    async def alive(self) -> bool:
        now = time.monotonic()
        if now - self.looked >= POLL:
            self.looked = now
            if await anyio.to_thread.run_sync(self.cluster.slots) > 0:
                self.seen = now
        return now - self.seen < GRACE


async def _engine_url(options: Any, stack: AsyncExitStack) -> str | None:
    """The engine URL the nodes get (the embedded engine started here when the HCP asks)."""
    if options.agent != "mol":
        return None
    artifact = options.artifact
    url = options.engine_url or os.environ.get("MOL_ENGINE_URL") or artifact.doc.engine.api_base
    if artifact.doc.engine.kind == "local":  # the embedded engine, started here
        from mol.runtime import open_engine

        await stack.enter_async_context(open_engine(artifact, url))
    if options.engine_check:  # the nodes reach the same engine at the same URL
        from mol.runtime import LiteLLMEngine, require_served

        await require_served(artifact, LiteLLMEngine.from_artifact(artifact, url))
    return url


async def _describe(cluster: Any, url: str | None, progress: Progress) -> None:
    """Say what the cluster offers; refuse one without slots; warn of an unreachable engine."""
    nodes = await anyio.to_thread.run_sync(cluster.nodes)
    if not nodes:
        raise ClusterError(f"no node of the Ray cluster at {cluster.address} advertises a "
                           "sandbox slot: start workers with 'mol eval worker --slots N' (see "
                           "docs/eval.md)")
    slots = sum(node.slots for node in nodes)
    listed = ", ".join(f"{node.name} {node.slots:g}" for node in nodes)
    progress.note(f"Ray cluster {cluster.address}: {len(nodes)} node"
                  f"{'s' * (len(nodes) != 1)}, {slots:g} sandbox slots ({listed})")
    here = await anyio.to_thread.run_sync(cluster.driver_address)
    elsewhere = [node for node in nodes if not loopback_host(node.address) and node.address != here]
    if url and loopback_host(urlsplit(url).hostname or "") and elsewhere:
        progress.note(f"warning: the engine URL {url} is a loopback address, which nodes on "
                      "other machines cannot reach; give --engine-url an address they can")

