"""One episode: a fresh hardened sandbox, the agent, the verifier, the result.

``run_episode`` is a self-contained function of the task (its folder), the artifact, the
engine and the image: it touches no store and no shared state, and returns an
``Episode`` carrying the result and the trajectory's lines, so it can run anywhere the
task folder, the HCP snapshot and the engine are reachable.

- The sandbox is the HCP's ``[sandbox]`` with the task's image, its working folder, its
  ``[environment]`` cpus, memory and storage where given, network only if the task allows
  the internet, and ``/tests`` and ``/logs`` (and ``/solution`` for the oracle) as extra
  writable folders.
- ``agent = "mol"``: the instruction is one user turn through the full harness (routed,
  or pinned to ``adapter``), whose terminal and file tools use this sandbox.
  ``agent = "oracle"``: ``solution/solve.sh`` runs instead.
- Budgets: the task's agent timeout (a fail, ``agent_timeout``), the HCP's steps and
  tokens (fails, ``max_steps`` / ``token_budget``); the verifier does not run then.
- Infrastructure failures (Docker, the engine, the verifier) are ``error`` results with
  their reason, never exceptions.
"""

from __future__ import annotations

import contextlib
import shlex
import time
from typing import Any

import anyio

from mol.core import __version__
from mol.core.errors import EngineError, MolError, SandboxError, TaskError
from mol.eval.store import Episode
from mol.eval.tasks import Task
from mol.eval.trajectories.format import dumps, parse
from mol.eval.trajectories.reads import hcp_reads
from mol.eval.trajectories.recording import (
    Recorder,
    RecordingEngine,
    RecordingSandbox,
    numbered_ids,
)
from mol.eval.verifier import MOUNTS, verify
from mol.hcp.schema import SandboxConfig
from mol.hcp.snapshot import folder_entries

AGENTS = ("mol", "oracle")


def sandbox_config(base: SandboxConfig, task: Task, image: str,
                   workdir: str | None = None) -> SandboxConfig:
    """The episode's sandbox settings: the HCP's, with the task's image and needs."""
    update: dict[str, Any] = {"image": image, "pool_size": 0}
    config = task.config
    if workdir and workdir != "/":
        update["workspace"] = workdir
    if config.cpus:
        update["cpus"] = float(config.cpus)
    if config.memory_mb:
        update["memory"] = f"{config.memory_mb}m"
    if config.storage_mb:
        update["workspace_size"] = f"{config.storage_mb}m"
    if config.allow_internet:
        update["network"] = "bridge"
    return SandboxConfig.model_validate({**base.model_dump(), **update})


async def run_episode(task: Task, artifact: Any, *, epoch: int = 1, agent: str = "mol",
                      adapter: str | None = None, image: str | None = None,
                      engine: Any = None, plugins: Any = None,
                      record: bool = True, model: str = "", tracer: Any = None) -> Episode:
    """Run one episode of ``task`` and return its result (with the trajectory's lines).

    ``engine``: the ``Engine`` the harness talks to (a ``LiteLLMEngine`` for the artifact
    when None); ``plugins``: a ``PluginManager`` episodes may share (loading one builds
    every tool's schema: about 0.1 s); ``image``: the task's image (the HCP's when None);
    ``record=False`` keeps no trajectory (and so no reads); ``model``: the engine's model
    fingerprint (``mol.eval.keys``), kept in the row; ``tracer``: the run's tracer, which the
    episode's runtime shares (``mol.runtime.open_tracer``)."""
    result = Episode(task.name, epoch, task.digest, artifact.digest, agent, adapter or "",
                     started=time.time(), mol_version=__version__,
                     behaviour_digest=artifact.behaviour_digest, model=model)
    clock = time.perf_counter()
    recorder = Recorder() if record else None
    if recorder is not None:
        recorder.header(task=task.name, task_digest=task.digest, epoch=epoch,
                        hcp_digest=artifact.digest, agent=agent, adapter=adapter,
                        instruction=task.instruction, mol_version=__version__)
    try:
        await _episode(task, artifact, result, recorder, adapter, image,
                       (engine, plugins, tracer))
    except SandboxError as exc:
        _error(result, "sandbox", exc)
    except EngineError as exc:
        _error(result, "engine", exc)
    except TaskError as exc:
        _error(result, "task", exc)
    except MolError as exc:
        _error(result, "internal", exc)
    except Exception as exc:  # an episode never takes the run down with it
        _error(result, "internal", f"{type(exc).__name__}: {exc}")
    result.finished = time.time()
    result.wall_sec = round(time.perf_counter() - clock, 6)
    if recorder is not None:
        _finish_trajectory(recorder, result, artifact)
    return result


def _error(result: Episode, reason: str, error: Any) -> None:
    result.outcome, result.reason, result.error, result.reward = "error", reason, str(error), None


async def _episode(task: Task, artifact: Any, result: Episode, recorder: Recorder | None,
                   adapter: str | None, image: str | None, runtime: tuple[Any, Any, Any]
                   ) -> None:
    from mol.sandboxes import docker
    from mol.sandboxes.sandbox import Sandbox

    image = image or artifact.doc.sandbox.image
    info = None
    if task.environment is not None:
        info = await docker.call(docker.inspect_image, image, what=f"inspect image {image}")
    workdir = ((info or {}).get("Config") or {}).get("WorkingDir") or None
    config = sandbox_config(artifact.doc.sandbox, task, image, workdir)
    mounts = (*MOUNTS, "/solution") if result.agent == "oracle" else MOUNTS
    async with Sandbox(config, session_id=f"eval-{task.name}-{result.epoch}", mounts=mounts,
                       seed=task.environment is not None, image=info) as raw:
        sandbox: Any = raw if recorder is None else RecordingSandbox(raw, recorder)
        clock = time.perf_counter()
        try:
            if result.agent == "oracle":
                stopped = await _oracle(sandbox, task)
            else:
                stopped = await _mol(sandbox, task, artifact, result, recorder, adapter,
                                     *runtime)
        finally:
            result.agent_sec = round(time.perf_counter() - clock, 6)
        if stopped:
            result.outcome, result.reason = "fail", stopped.partition(":")[0]
            result.error = _budget(stopped, task, artifact)
            return
        verdict = await verify(sandbox, task)
    result.outcome, result.reward = verdict.outcome, verdict.reward
    result.reason, result.error = verdict.reason, verdict.error
    if recorder is not None:
        recorder.add({"kind": "verifier", "exit_code": verdict.exit_code,
                      "reward": verdict.reward, "output": verdict.output})


def _budget(stopped: str, task: Task, artifact: Any) -> str:
    """The budget that ran out, in words (``stopped`` is ``why:adapter`` for HCP budgets)."""
    why, _, adapter = stopped.partition(":")
    if why == "agent_timeout":
        return f"the agent did not finish within {task.config.agent_timeout:g} s"
    config = artifact.doc.adapter(adapter)
    if why == "max_steps":
        return (f"{adapter} used its {config.max_steps} steps (adapters.{adapter}.max_steps) "
                "before finishing")
    return (f"{adapter} used its {config.max_turn_tokens} tokens "
            f"(adapters.{adapter}.max_turn_tokens) before finishing")


async def _oracle(sandbox: Any, task: Task) -> str:
    """Run ``solution/solve.sh``; returns ``agent_timeout`` when it runs out of time."""
    if task.solution is None:
        raise TaskError(f"task {task.name} has no solution/solve.sh for --agent oracle")
    await sandbox.upload("/solution", folder_entries(task.solution.parent))
    run = await sandbox.run(f"cd {shlex.quote(sandbox.workspace)} && bash /solution/solve.sh",
                            timeout=task.config.agent_timeout)
    return "agent_timeout" if run.timed_out else ""


async def _mol(sandbox: Any, task: Task, artifact: Any, result: Episode,
               recorder: Recorder | None, adapter: str | None, engine: Any,
               plugins: Any, tracer: Any) -> str:
    """One user turn through a runtime session; returns why it stopped early, if it did."""
    from mol.core.tools import Resources
    from mol.plugins.builtin.sandbox import RESOURCE
    from mol.runtime import LiteLLMEngine, open_runtime

    engine = engine or LiteLLMEngine.from_artifact(artifact)
    if recorder is not None:
        engine = RecordingEngine(engine, recorder)
    resources = Resources()
    # The episode owns the sandbox (the verifier needs it after the turn): the session
    # gets it as an already-open resource that closing the session leaves alone.
    await resources.get(RESOURCE, lambda: contextlib.nullcontext(sandbox))
    observers: list[Any] = [] if recorder is None else [recorder.on_event]
    stopped = "agent_timeout"
    session = None
    try:
        # Orphans are collected once per run (the runner, the Ray worker), not per episode.
        async with open_runtime(artifact, engine=engine, plugins=plugins,
                                collect_orphans=False, tracer=tracer) as runtime:
            async with runtime.session(
                    resources=resources, observers=observers, call_ids=numbered_ids(),
                    tool_wrapper=recorder.wrap_tools if recorder else None) as session:
                with anyio.move_on_after(task.config.agent_timeout):
                    turn = await session.turn(task.instruction, adapter=adapter)
                    stopped = f"{turn.stopped}:{turn.adapter}" if turn.stopped else ""
    finally:
        if session is not None and session.current is not None:
            used = session.current.usage
            result.steps, result.prompt_tokens = used.calls.get("answer", 0), used.prompt_tokens
            result.completion_tokens, result.cached_tokens = (used.completion_tokens,
                                                              used.cached_tokens)
    return stopped


def _finish_trajectory(recorder: Recorder, result: Episode, artifact: Any) -> None:
    lines = recorder.finish()
    reads = hcp_reads(parse(lines), artifact)
    result.reads = reads
    lines.append(dumps({"kind": "result", "outcome": result.outcome, "reward": result.reward,
                        "reason": result.reason, "error": result.error, "steps": result.steps,
                        "tokens": {"prompt": result.prompt_tokens,
                                   "completion": result.completion_tokens,
                                   "cached": result.cached_tokens},
                        "reads": reads}))
    result.lines = lines
