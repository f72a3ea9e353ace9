"""Evaluate a candidate on the slice it can affect, inherit the rest, apply the gate.

``evaluate`` works against a parent run (a run folder of the candidate's parent behaviour):

1. the parent run must still hold: every task folder unchanged since (its digest), the
   engine serving the same model (its fingerprint) and the same mol version; otherwise the
   parent's results say nothing about today and the run must be redone first;
2. the slice (``mol.eval.evolve.slice``) splits the run's tasks into affected and not;
3. the unaffected tasks' episodes are copied into the candidate's run folder, marked
   ``inherited`` (with their trajectories, their reads recomputed under the candidate);
4. the affected tasks run under the candidate, every epoch; when ``epochs`` asks for more
   epochs than the parent has, the parent's missing epochs of the affected tasks run too
   (into the parent's run folder, as ``mol eval run --epochs`` would);
5. the gate (``mol.eval.evolve.gate``) decides on the affected tasks.

The evaluation records how many episodes ran against how many a full re-evaluation would
run. The same candidate evaluated again against the same run and epochs is not rerun.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mol.core import __version__
from mol.core.errors import EvalError, UsageError
from mol.eval import keys
from mol.eval.evolve.gate import decide
from mol.eval.evolve.lab import Candidate, Lab, resolved
from mol.eval.evolve.slice import compute_slice
from mol.eval.store import Episode, Store


@dataclass
class ParentRun:
    """A run folder as the parent of an evaluation."""

    folder: Path
    meta: dict[str, Any]
    artifact: Any
    """The HCP the run ran under (its snapshot)."""
    episodes: list[Episode]
    tasks: list[Any]
    """The suite's tasks the run holds."""

    @property
    def epochs(self) -> int:
        """The most epochs of any task in the run."""
        return max((e.epoch for e in self.episodes), default=0)

    @property
    def suite(self) -> Path:
        """The suite folder the run ran."""
        return Path(self.meta["suite"])


async def open_parent_run(run: Path, engine_url: str | None = None) -> ParentRun:
    """The run folder ``run``, checked to still stand for today's tasks, model and mol."""
    from mol.eval.runner import SNAPSHOT
    from mol.eval.tasks import load_suite
    from mol.hcp.snapshot import load_snapshot

    run = resolved(run)
    with Store(run, create=False) as store:
        meta, episodes = store.meta(), store.episodes()
    if meta.get("agent") != "mol":
        raise UsageError(f"{run} is a run of agent {meta.get('agent')!r}: evolve needs the "
                         "harness's episodes (--agent mol)")
    artifact = load_snapshot(run / SNAPSHOT)
    names = {e.task for e in episodes}
    tasks = [t for t in load_suite(Path(meta["suite"])) if t.name in names]
    digests = {t.name: t.digest for t in tasks}
    stale = sorted({e.task for e in episodes if digests.get(e.task) != e.task_digest})
    model = await keys.model_fingerprint(artifact, engine_url)
    other = sorted({e.model for e in episodes if e.model != model})
    versions = sorted({e.mol_version for e in episodes if e.mol_version != __version__})
    problems = []
    if stale:
        problems.append(f"the task folders of {', '.join(stale)} changed (or are gone) since")
    if other:
        problems.append(f"its episodes ran on model {other[0] or '(unknown)'}, the engine now "
                        f"serves {model}")
    if versions:
        problems.append(f"its episodes ran under mol {versions[0]}, this is {__version__}")
    if problems:
        raise EvalError(f"{run} no longer stands for its HCP: {'; '.join(problems)}; rerun it "
                        f"(mol eval run {meta['suite']} --hcp ... --out {run})")
    return ParentRun(run, meta, artifact, episodes, tasks)


@dataclass
class EvaluateOptions:
    """What ``mol evolve evaluate`` was asked to do."""

    lab: Lab
    candidate: str
    run: Path
    epochs: int | None = None
    engine_url: str | None = None
    jobs: int = 1
    progress: Callable[[], Any] | None = None
    """Makes the progress display of each run (``mol.eval.progress.Progress``)."""


async def evaluate(options: EvaluateOptions) -> dict[str, Any]:
    """Evaluate the candidate against the run; the evaluation as recorded in the lab."""
    from mol.hcp.loader import load

    lab = options.lab
    candidate = lab.get(options.candidate)
    parent = await open_parent_run(options.run, options.engine_url)
    if parent.artifact.behaviour_digest != candidate.record["parent_behaviour"]:
        raise UsageError(f"{parent.folder} is a run of another HCP than candidate "
                         f"{candidate.id}'s parent (behaviour {parent.artifact.behaviour_digest}"
                         f", not {candidate.record['parent_behaviour']})")
    epochs = options.epochs or parent.epochs
    if epochs < 1:
        raise UsageError("--epochs takes a positive number")
    done = candidate.evaluation(parent.folder)
    if done is not None and done["epochs"] == epochs:
        return {**done, "reused": True}
    artifact = load(candidate.hcp)
    found = await compute_slice(parent.folder, artifact, candidate.record["touched"])
    affected = set(found.affected)
    ran = {"parent": 0, "candidate": 0, "tokens": 0}
    if affected and epochs > parent.epochs:
        await _run(options, parent, parent.artifact, parent.folder, affected, epochs, ran,
                   "parent")
        parent = await open_parent_run(parent.folder, options.engine_url)
    out = candidate.run_folder(parent.folder)
    inherited = _inherit(parent, artifact, out, set(found.unaffected))
    await _run(options, parent, artifact, out, affected, epochs, ran, "candidate")
    with Store(out, create=False) as store:
        mine = [e for e in store.episodes() if e.task in affected and e.epoch <= epochs]
    theirs = [e for e in parent.episodes if e.task in affected and e.epoch <= epochs]
    guards = {t.name for t in parent.tasks if "guard" in t.config.tags}
    verdict = decide(theirs, mine, sorted(affected), guards, len(parent.tasks),
                     parent.artifact.doc.evolve)
    evaluation = {
        "candidate": candidate.id, "run": str(parent.folder), "candidate_run": str(out),
        "suite": str(parent.suite), "epochs": epochs,
        "role": _role(parent, candidate.record["run"]),
        "slice": found.to_dict(), "inherited": inherited,
        "episodes_run": {"parent": ran["parent"], "candidate": ran["candidate"]},
        "tokens_run": ran["tokens"],
        "episodes_full": len(parent.tasks) * epochs, **verdict.to_dict(),
        "created": time.time()}
    lab.add_evaluation(candidate, evaluation)
    return {**evaluation, "reused": False}


async def _run(options: EvaluateOptions, parent: ParentRun, artifact: Any, out: Path,
               tasks: set[str], epochs: int, ran: dict[str, int], side: str) -> None:
    """Run the missing episodes of ``tasks`` under ``artifact`` into ``out``, counting them
    (and their tokens) in ``ran``."""
    from mol.eval.runner import RunOptions, run_suite

    def counted(episode: Episode) -> None:
        ran[side] += 1
        ran["tokens"] += episode.prompt_tokens + episode.completion_tokens

    run = RunOptions(parent.suite, artifact, out, options.jobs, epochs=epochs,
                     adapter=parent.meta.get("adapter") or None,
                     engine_url=options.engine_url, only=frozenset(tasks))
    progress = options.progress() if options.progress else None
    await run_suite(run, progress=progress, on_episode=counted)


def _inherit(parent: ParentRun, artifact: Any, out: Path, tasks: set[str]) -> int:
    """Copy the parent's episodes of ``tasks`` into ``out``, marked inherited; how many."""
    from mol.eval.trajectories.format import parse
    from mol.eval.trajectories.reads import hcp_reads

    count = 0
    with Store(out) as store:
        keys.claim(store, artifact, "mol", parent.meta.get("adapter") or None,
                   {"suite": str(parent.suite), "hcp_name": artifact.name,
                    "created": time.time(), "mol_version": __version__})
        have = {(e.task, e.epoch) for e in store.episodes()}
        for episode in parent.episodes:
            if episode.task not in tasks or (episode.task, episode.epoch) in have:
                continue
            lines = (parent.folder / episode.trajectory).read_text(
                encoding="utf-8").splitlines() if episode.trajectory else None
            reads = hcp_reads(parse(lines), artifact) if lines else episode.reads
            store.put(replace(episode, inherited=parent.artifact.digest, reads=reads,
                              lines=lines, trajectory=None))
            count += 1
    return count


def _role(parent: ParentRun, selection_run: str) -> str:
    """``selection`` on the run the candidate was proposed against, ``confirmation`` on a run
    sharing none of its tasks (by name or folder digest), else ``overlapping`` (which neither
    selects nor confirms)."""
    if str(parent.folder) == selection_run:
        return "selection"
    try:
        with Store(Path(selection_run), create=False) as store:
            used = {(e.task, e.task_digest) for e in store.episodes()}
    except EvalError:  # the selection run is gone: nothing says the tasks differ
        return "overlapping"
    names, digests = {name for name, _ in used}, {digest for _, digest in used}
    mine = {(e.task, e.task_digest) for e in parent.episodes}
    return "overlapping" if any(n in names or d in digests for n, d in mine) \
        else "confirmation"


def selection_problem(lab: Lab, candidate: Candidate) -> str | None:
    """Why ``candidate`` may not be promoted yet, or None."""
    selection = [e for e in candidate.evaluations if e["role"] == "selection"]
    if not selection:
        return f"candidate {candidate.id} has not been evaluated (mol evolve evaluate)"
    last = selection[-1]
    if last["outcome"] != "promote":
        return f"candidate {candidate.id}'s evaluation says {last['outcome']}: {last['reason']}"
    rivals = [c.id for c in lab.siblings(candidate) if c.evaluations]
    confirmed = any(e["role"] == "confirmation" and e["outcome"] == "promote"
                    for e in candidate.evaluations)
    if rivals and not confirmed:
        return (f"candidate {candidate.id} was selected among {len(rivals) + 1} candidates "
                f"evaluated together ({', '.join(rivals)}): the best of several needs a "
                "confirmation run on tasks not used to select it (mol evolve evaluate "
                "--candidate ID --run RUN_OF_THE_PARENT_ON_OTHER_TASKS)")
    return None
