"""A node's side of a Ray episode: the folders it was sent, then ``run_episode``.

Ray runs one task at a time in a worker process and reuses the process for the next task
of the same run, so a worker keeps what the local runner shares across its episodes: each
HCP loaded once from its snapshot, one engine client and one plugin manager per HCP and
engine URL, and one event loop, in a thread of its own (litellm's HTTP clients belong to
the loop that made them, so a loop per task would strand them). Before its first episode
a worker removes the sandboxes that dead processes left on this node's Docker engine (the
workers of a killed driver or of a lost node on the same machine). Every failure of the
episode itself is a row; nothing here raises to Ray.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from mol.core import __version__
from mol.core.errors import (
    EngineError,
    EvalError,
    HCPError,
    MolError,
    SandboxError,
    TaskError,
)
from mol.eval.cluster.payload import Link, Spec, failed, forget, materialize, pack
from mol.eval.store import Episode
from mol.eval.tasks import Task, load_task
from mol.hcp.snapshot import Entry, load_snapshot

_REASONS: tuple[tuple[type[MolError], str], ...] = (
    (TaskError, "task"), (SandboxError, "sandbox"), (EngineError, "engine"))

_worker: Worker | None = None
"""This process's state (a Ray worker process serves many episodes of one run)."""


def run(spec: Spec, hcp: list[Entry], tree: tuple[list[Entry], list[Link]],
        placement: str) -> dict[str, Any]:
    """Run one episode here and return it packed for the driver (``payload.pack``)."""
    global _worker
    if _worker is None:
        _worker = Worker()
    return _worker.run(spec, hcp, tree, placement)


class Worker:
    """What one worker process keeps across the episodes it runs."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="mol-episodes",
                         daemon=True).start()
        self.artifacts: dict[str, Any] = {}
        self.shared: dict[tuple[str, str | None], tuple[Any, Any]] = {}
        self.cleaned = False

    def run(self, spec: Spec, hcp: list[Entry], tree: tuple[list[Entry], list[Link]],
            placement: str) -> dict[str, Any]:
        """``_run`` on this process's loop, waited for."""
        return asyncio.run_coroutine_threadsafe(
            self._run(spec, hcp, tree, placement), self.loop).result()

    async def _run(self, spec: Spec, hcp: list[Entry], tree: tuple[list[Entry], list[Link]],
                   placement: str) -> dict[str, Any]:
        notes: list[str] = []
        started = time.time()
        try:
            if spec.mol_version != __version__:
                raise EvalError(f"this node runs mol {__version__}, the driver mol "
                                f"{spec.mol_version}: install the same mol-agent everywhere")
            artifact = self._artifact(spec, hcp)
            task = self._task(spec, tree)
            await self._clean(notes)
            episode = await self._episode(spec, task, artifact, notes)
        except MolError as exc:
            reason = next((word for kind, word in _REASONS if isinstance(exc, kind)),
                          "internal")
            episode = failed(spec, reason, str(exc), started)
        except Exception as exc:  # a row, never a task failure Ray would report vaguely
            episode = failed(spec, "internal", f"{type(exc).__name__}: {exc}", started)
        episode.placement = placement
        return pack(episode, notes)

    def _artifact(self, spec: Spec, hcp: list[Entry]) -> Any:
        artifact = self.artifacts.get(spec.hcp_digest)
        if artifact is None:
            folder = materialize("hcp", spec.hcp_digest, hcp)
            artifact = load_snapshot(folder)
            if artifact.digest != spec.hcp_digest:
                forget(folder)
                raise HCPError(f"the HCP snapshot loads here with digest {artifact.digest[:19]}"
                               f", not the driver's {spec.hcp_digest[:19]} (another mol "
                               "version's built-in skills?)")
            self.artifacts[spec.hcp_digest] = artifact
        return artifact

    def _task(self, spec: Spec, tree: tuple[list[Entry], list[Link]]) -> Task:
        folder = materialize("tasks", spec.task_digest, *tree)
        task = load_task(folder, spec.task)
        if task.digest != spec.task_digest:
            forget(folder)
            raise TaskError(f"task {spec.task}: its folder arrives here with digest "
                            f"{task.digest[:19]}, not {spec.task_digest[:19]} (links to "
                            "folders are not sent)")
        return task

    async def _clean(self, notes: list[str]) -> None:
        if self.cleaned:
            return
        from mol.runtime import collect_orphans

        removed = await collect_orphans()  # episodes open their runtimes without collecting
        self.cleaned = True
        if removed:
            notes.append(f"removed {len(removed)} sandbox(es) left by a process that died")

    async def _episode(self, spec: Spec, task: Task, artifact: Any,
                       notes: list[str]) -> Episode:
        from mol.eval.episode import run_episode
        from mol.eval.images import ensure_image

        started = time.time()
        try:
            image = await ensure_image(task, artifact.doc.sandbox.image, notes.append)
        except MolError as exc:
            notes.append(f"task {task.name}: {exc}")
            return failed(spec, "build", str(exc), started)
        engine, plugins = await self._shared(spec, artifact) if spec.agent == "mol" else \
            (None, None)
        return await run_episode(task, artifact, epoch=spec.epoch, agent=spec.agent,
                                 adapter=spec.adapter, image=image, engine=engine,
                                 plugins=plugins, record=spec.record, model=spec.model)

    async def _shared(self, spec: Spec, artifact: Any) -> tuple[Any, Any]:
        key = (spec.hcp_digest, spec.engine_url)
        if key not in self.shared:
            import anyio

            from mol.plugins.manager import PluginManager
            from mol.runtime import LiteLLMEngine

            engine = LiteLLMEngine.from_artifact(artifact, spec.engine_url)
            await anyio.to_thread.run_sync(engine.load)
            self.shared[key] = (engine, PluginManager.for_artifact(artifact))
        return self.shared[key]
