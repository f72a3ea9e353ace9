"""Run a suite: the episodes still missing from the store, ``jobs`` at a time.

A run folder is a run of one HCP (by digest), one agent and one adapter pin. Rerunning
into it skips the episodes already stored (``redo`` reruns them all, ``retry_errors``
only the errors, and an episode whose task folder changed since is rerun). Each episode's
result is written the moment it finishes, so a killed run loses only the ones in flight;
sandboxes a killed run left behind are removed when the next run starts. Task images are
built (or found) before the first episode starts.

Where episodes run is the backend's business (``_backend``): this process's task group,
or Ray tasks on a cluster's nodes (``options.ray``, ``mol.eval.cluster.backend``). Either way the
results come back here and this process alone writes the store.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any

import anyio

from mol.core import __version__, tracing
from mol.core.errors import MolError, UsageError
from mol.eval import keys
from mol.eval.episode import AGENTS, run_episode
from mol.eval.images import ensure_image
from mol.eval.progress import Progress, ticking
from mol.eval.store import Episode, Store
from mol.eval.tasks import Task, load_suite

RunOne = Callable[[Task, int], Awaitable[Episode]]
"""A backend's way to run one episode (task, epoch) to its result."""

SNAPSHOT = "hcp"
"""The run folder's copy of the HCP it ran under (``mol.hcp.snapshot``)."""


@dataclass
class RunOptions:
    """What ``mol eval run`` was asked to do."""

    suite: Path
    artifact: Any
    out: Path | None = None
    jobs: int = 1
    _: KW_ONLY  # the rest by name: fields are added over time
    epochs: int = 1
    tasks: str | None = None
    agent: str = "mol"
    adapter: str | None = None
    engine_url: str | None = None
    redo: bool = False
    retry_errors: bool = False
    record: bool = True
    only: frozenset[str] | None = None
    """Run only these tasks (by name), besides ``tasks``: ``mol evolve``'s slice."""
    ray: str | None = None
    """Run the episodes as Ray tasks on this cluster (``local``, ``auto``, an address);
    ``jobs`` 0 then leaves the bound to the cluster's sandbox slots (``mol.eval.cluster.backend``)."""
    node_retries: int = 2
    """With ``ray``: how many more times an episode lost with its node is run elsewhere."""
    engine_check: bool = False
    """Before the first episode, refuse to run when the engine does not serve every adapter
    (``mol.runtime.require_served``); ``mol eval run`` sets it unless ``--no-engine-check``.
    A run with nothing left to do, or ``agent = "oracle"``, never asks the engine."""


def state_dir() -> Path:
    """Where runs go without ``--out``: ``$XDG_STATE_HOME/mol/eval`` (``~/.local/state``)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(base) / "mol" / "eval"


def default_out(options: RunOptions) -> Path:
    """``SUITE-AGENT[-ADAPTER]-DIGEST`` under the state dir: the same command, the same run."""
    pin = f"-{options.adapter}" if options.adapter else ""
    name = f"{options.suite.resolve().name}-{options.agent}{pin}-{options.artifact.digest[7:19]}"
    return state_dir() / name


def check(options: RunOptions, tasks: list[Task]) -> None:
    """Refuse what cannot run, before anything starts."""
    if options.agent not in AGENTS:
        raise UsageError(f"--agent {options.agent!r}: use one of {', '.join(AGENTS)}")
    if options.jobs < (0 if options.ray else 1) or options.epochs < 1:
        raise UsageError("-j and --epochs take a positive number")
    if options.node_retries < 0:
        raise UsageError("--node-retries takes a number >= 0")
    if options.adapter is not None:
        try:
            options.artifact.doc.adapter(options.adapter)
        except (AttributeError, KeyError):
            raise UsageError(f"--adapter {options.adapter!r}: the HCP has no such adapter") \
                from None
    if options.agent == "oracle":
        missing = [task.name for task in tasks if task.solution is None]
        if missing:
            raise UsageError(f"--agent oracle needs solution/solve.sh; missing in: "
                             f"{', '.join(missing)}")


def pending(tasks: list[Task], epochs: int, stored: dict[tuple[str, int], Episode],
            options: RunOptions, key: keys.ResultKey | None = None) -> list[tuple[Task, int]]:
    """The (task, epoch) pairs this run still has to do, epoch by epoch: missing, or stored
    under another key (``mol.eval.keys``; with no ``key``, another task digest)."""
    todo = []
    for epoch in range(1, epochs + 1):
        for task in tasks:
            done = stored.get((task.name, epoch))
            stale = done is not None and (done.task_digest != task.digest if key is None
                                          else not keys.reusable(done, task.digest, key))
            if (done is None or options.redo or stale
                    or (options.retry_errors and done.outcome == "error")):
                todo.append((task, epoch))
    return todo


async def run_suite(options: RunOptions, *, progress: Progress | None = None,
                    on_episode: Callable[[Episode], None] | None = None) -> Path:
    """Run the missing episodes of ``options.suite``; returns the run folder."""
    from mol.hcp import snapshot

    tasks = [task for task in load_suite(options.suite, options.tasks)
             if options.only is None or task.name in options.only]
    check(options, tasks)
    artifact = options.artifact
    out = options.out or default_out(options)
    model = await keys.model_fingerprint(artifact, options.engine_url) \
        if options.agent == "mol" else ""
    with Store(out) as store:
        keys.claim(store, artifact, options.agent, options.adapter,
                   {"suite": str(options.suite.resolve()), "hcp_name": artifact.name,
                    "created": time.time(), "mol_version": __version__})
        if not (out / SNAPSHOT / snapshot.TOML).is_file():
            snapshot.write(artifact, out / SNAPSHOT)
        stored = {(e.task, e.epoch): e for e in store.episodes()}
        todo = pending(tasks, options.epochs, stored, options,
                       keys.ResultKey(artifact.behaviour_digest, model))
        progress = progress or Progress(len(todo))
        progress.total = len(todo)
        for note in sorted({n for task in tasks for n in task.config.notes}):
            progress.note(note)
        progress.note(f"{_count(len(todo), 'episode')} to run ({_count(len(tasks), 'task')} x "
                      f"{_count(options.epochs, 'epoch')}, "
                      f"{len(tasks) * options.epochs - len(todo)} stored) in {out}")
        if todo:
            await _traced_run(options, todo, store, progress, on_episode, model, out)
        progress.close()
    return out


async def _traced_run(options: RunOptions, todo: list[tuple[Task, int]], store: Store,
                      progress: Progress, on_episode: Callable[[Episode], None] | None,
                      model: str, out: Path) -> None:
    """``_run`` under the run's span when tracing is on (each episode's span its child)."""
    from mol.runtime import open_tracer

    async with open_tracer(options.artifact) as tracer:
        with tracing.root(tracer, "eval.run", suite=options.suite.resolve().name, run=str(out),
                          agent=options.agent, adapter=options.adapter, episodes=len(todo),
                          artifact=options.artifact):
            await _run(options, todo, store, progress, on_episode, model, tracer)


def _count(number: int, word: str) -> str:
    return f"{number} {word}{'s' * (number != 1)}"


async def _run(options: RunOptions, todo: list[tuple[Task, int]], store: Store,
               progress: Progress, on_episode: Callable[[Episode], None] | None,
               model: str = "", tracer: Any = None) -> None:
    limiter = anyio.CapacityLimiter(options.jobs or math.inf)

    async def one(task: Task, epoch: int) -> None:
        async with limiter:
            with tracing.span("eval.episode", task=task.name, epoch=epoch,
                              agent=options.agent) as span:
                episode = await run_one(task, epoch)
                span.note(episode=episode)
            await store.aput(episode)
        progress.finished(episode)
        if on_episode is not None:
            on_episode(episode)

    async with _backend(options, todo, progress, model, tracer) as run_one:
        async with anyio.create_task_group() as group:
            if progress.live:
                await group.start(ticking, progress)
            async with anyio.create_task_group() as episodes:
                for task, epoch in todo:
                    episodes.start_soon(one, task, epoch)
            group.cancel_scope.cancel()


def _backend(options: RunOptions, todo: list[tuple[Task, int]], progress: Progress,
             model: str, tracer: Any = None) -> AbstractAsyncContextManager[RunOne]:
    """Where episodes run: in this process, or as Ray tasks on a cluster (``--ray``).
    ``model``: the engine's model fingerprint every result is keyed by; ``tracer``: the
    run's, which local episodes share."""
    if options.ray is not None:
        from mol.eval.cluster.backend import ray_episodes

        return ray_episodes(options, todo, progress, model)
    return _local(options, todo, progress, model, tracer)


@asynccontextmanager
async def _local(options: RunOptions, todo: list[tuple[Task, int]],
                 progress: Progress, model: str, tracer: Any = None) -> AsyncIterator[RunOne]:
    """Episodes in this process's task group, sharing one engine and one plugin manager."""
    from mol.runtime import collect_orphans

    artifact = options.artifact
    # Once per run, not per episode: episodes open their runtimes with collect_orphans off.
    removed = await collect_orphans()
    if removed:
        progress.note(f"removed {len(removed)} sandbox(es) left by a run that died")
    images = await _images(sorted({task.name: task for task, _ in todo}.values(),
                                  key=lambda t: t.name), artifact, progress)

    async def run(task: Task, epoch: int) -> Episode:
        image = images[task.name]
        if isinstance(image, MolError):
            return Episode(task.name, epoch, task.digest, artifact.digest, options.agent,
                           options.adapter or "", reason="build", error=str(image),
                           started=time.time(), finished=time.time(), mol_version=__version__,
                           behaviour_digest=artifact.behaviour_digest, model=model)
        return await run_episode(task, artifact, epoch=epoch, agent=options.agent,
                                 adapter=options.adapter, image=image, engine=engine,
                                 plugins=plugins, record=options.record, model=model,
                                 tracer=tracer)

    async with AsyncExitStack() as stack:
        engine = await _engine(options, stack)
        plugins = None
        if options.agent == "mol":
            from mol.plugins.manager import PluginManager

            plugins = PluginManager.for_artifact(artifact)  # one for all: ~0.1 s to load
        yield run


async def _images(tasks: list[Task], artifact: Any, progress: Progress) -> dict[str, Any]:
    """Task name -> its image, or the ``MolError`` its build failed with."""
    images: dict[str, Any] = {}
    for task in tasks:
        try:
            images[task.name] = await ensure_image(task, artifact.doc.sandbox.image,
                                                   progress.note)
        except MolError as exc:
            progress.note(f"task {task.name}: {exc}")
            images[task.name] = exc
    return images


async def _engine(options: RunOptions, stack: AsyncExitStack) -> Any:
    """The engine every episode shares (the embedded one started once, when the HCP asks)."""
    if options.agent != "mol":
        return None
    from mol.runtime import open_engine

    engine = await stack.enter_async_context(open_engine(options.artifact, options.engine_url))
    if options.engine_check:  # after open_engine: an embedded engine is started by then
        from mol.runtime import require_served

        await require_served(options.artifact, engine)
    # Importing litellm takes seconds: in a worker thread it does not stall the episodes.
    await anyio.to_thread.run_sync(engine.load)
    return engine
