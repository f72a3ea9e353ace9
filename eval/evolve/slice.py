"""The slice of a recorded run an edit can affect, in three tiers, without a model or Docker.

For each episode of the parent's run, given the pointers the edit touches:

1. **reads**: the episode read none of them (no read is a prefix of a touched pointer, or
   the other way round): unaffected;
2. **replay**: it replays under the edited HCP (``mol.eval.trajectories.replay``) making exactly the
   recorded requests: unaffected. Not tried when a touched pointer meets a read replay
   cannot check (``mol.eval.trajectories.reads.opaque_reads``: the engine, the sandbox, MCP servers, a
   skill copied into the sandbox);
3. otherwise affected, with the reason (the first divergence, or why replay could not
   decide).

Episodes the slice cannot vouch for are affected too: errors (their outcome says nothing
about the HCP), episodes recorded without a trajectory, and oracle episodes. A task is
affected when any of its epochs is; it is unaffected at the highest tier any epoch needed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mol.hcp.evolvable import related


@dataclass
class TaskSlice:
    """What the slice says of one task."""

    task: str
    tier: int
    """1 or 2: unaffected (by reads, by replay); 3: affected."""
    reason: str
    epochs: list[int] = field(default_factory=list)

    @property
    def affected(self) -> bool:
        """Whether the edit can change the task's episodes."""
        return self.tier == 3


@dataclass
class Slice:
    """The slice of a run an edit can affect."""

    touched: list[str]
    tasks: list[TaskSlice]

    @property
    def affected(self) -> list[str]:
        """The affected tasks, by name."""
        return [t.task for t in self.tasks if t.affected]

    @property
    def unaffected(self) -> list[str]:
        """The tasks the edit cannot change, by name."""
        return [t.task for t in self.tasks if not t.affected]

    def counts(self) -> dict[str, int]:
        """Tasks per tier: ``unaffected_by_reads``, ``unaffected_by_replay``, ``affected``."""
        return {"unaffected_by_reads": sum(t.tier == 1 for t in self.tasks),
                "unaffected_by_replay": sum(t.tier == 2 for t in self.tasks),
                "affected": sum(t.tier == 3 for t in self.tasks)}

    def to_dict(self) -> dict[str, Any]:
        """The slice as JSON-able data (``mol eval affected --json``)."""
        return {"touched": self.touched, **self.counts(), "tasks": [
            {**asdict(t), "affected": t.affected} for t in self.tasks]}


async def compute_slice(run: Path, candidate: Any, touched: list[str]) -> Slice:
    """The slice of ``run`` (a run folder) that ``candidate``, differing from the run's HCP
    at ``touched``, can affect."""
    from mol.eval.store import Store
    from mol.plugins.manager import PluginManager

    with Store(run, create=False) as store:
        episodes = store.episodes()
    plugins = PluginManager.for_artifact(candidate)
    by_task: dict[str, list[tuple[int, int, str]]] = {}
    for episode in episodes:
        tier, reason = await _episode_tier(run, episode, candidate, touched, plugins)
        by_task.setdefault(episode.task, []).append((tier, episode.epoch, reason))
    tasks = []
    for task, verdicts in sorted(by_task.items()):
        tier, _, reason = max(verdicts, key=lambda v: (v[0], -v[1]))
        tasks.append(TaskSlice(task, tier, reason, sorted(e for _, e, _ in verdicts)))
    return Slice(sorted(touched), tasks)


async def _episode_tier(run: Path, episode: Any, candidate: Any, touched: list[str],
                        plugins: Any) -> tuple[int, str]:
    """``(tier, reason)`` of one recorded episode."""
    from mol.eval.trajectories.format import read
    from mol.eval.trajectories.reads import OPAQUE, opaque_reads
    from mol.eval.trajectories.replay import replay_episode
    from mol.hcp.evolvable import within

    if episode.agent != "mol":
        return 3, f"agent {episode.agent}: nothing recorded to judge the edit by"
    if episode.outcome == "error":
        return 3, f"epoch {episode.epoch} ended in error ({episode.reason}) in the parent run"
    if episode.trajectory is None:
        return 3, f"epoch {episode.epoch} was recorded without a trajectory (--no-record)"
    hits = sorted({read for read in episode.reads if any(related(read, t) for t in touched)})
    if not hits:
        return 1, "reads none of the touched paths"
    trajectory = read(run / episode.trajectory)
    blind = [r for r in opaque_reads(trajectory, episode.reads)
             if any(related(r, t) for t in touched)]
    # (An episode recorded before a read was derived, e.g. of an adapter's LoRA, read its
    # whole adapter: an opaque pointer touched under it is blind too.)
    blind += [t for t in touched if t not in blind and any(within(p, t) for p in OPAQUE)
              and any(related(r, t) for r in hits)]
    if blind:
        return 3, f"reads {', '.join(blind)}, which replay cannot check"
    result = await replay_episode(trajectory, candidate, plugins)
    if result.verdict == "identical":
        return 2, f"reads {', '.join(hits[:3])}{' ...' if len(hits) > 3 else ''}; " \
                  "its replay stays identical"
    if result.divergence is not None:
        d = result.divergence
        return 3, (f"replay diverges at request {d.request} ({d.hop}, {d.adapter}), "
                   f"{d.where}")
    return 3, f"replay {result.verdict}: {result.note}"
