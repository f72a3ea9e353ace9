"""What ``mol eval show`` and ``mol eval compare`` print: tables for people, stable JSON.

``show_data(run)`` is the ``--json`` object of ``mol eval show``: ``run`` (folder),
``meta`` (what the run is of), then ``mol.eval.stats.summary`` with each task's
``placement`` (where its episodes ran: ``local``, or the Ray nodes), and ``results``: one
row per episode (``result_row``), so scripts need not read the trajectories. ``compare_data`` is
``{"a": show_data(A), "b": show_data(B), "compare": stats.compare(A, B)}``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mol.eval import stats
from mol.eval.store import Episode, Store


def show_data(run: Path) -> dict[str, Any]:
    """The figures of one run folder."""
    with Store(run, create=False) as store:
        meta, episodes = store.meta(), store.episodes()
    figures = stats.summary(episodes)
    where: dict[str, set[str]] = {}
    for episode in episodes:
        where.setdefault(episode.task, set()).add(episode.placement)
    for row in figures["tasks"]:
        row["placement"] = sorted(where.get(row["task"], ()))
    return {"run": str(run), "meta": meta, **figures,
            "results": [result_row(episode) for episode in episodes], "_episodes": episodes}


def result_row(episode: Episode) -> dict[str, Any]:
    """One episode as ``mol eval show --json`` lists it under ``results``."""
    return {"task": episode.task, "epoch": episode.epoch, "outcome": episode.outcome,
            "reward": episode.reward, "reason": episode.reason, "error": episode.error,
            "steps": episode.steps,
            "tokens": {"prompt": episode.prompt_tokens, "completion": episode.completion_tokens,
                       "cached": episode.cached_tokens},
            "wall_sec": round(episode.wall_sec, 3), "agent_sec": round(episode.agent_sec, 3),
            "placement": episode.placement, "trajectory": episode.trajectory,
            "inherited": episode.inherited}


def public(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without the private keys (the episodes themselves)."""
    return {k: v for k, v in data.items() if not k.startswith("_")}


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def show_text(data: dict[str, Any]) -> str:
    """The per-task table and the run's figures, for people."""
    meta = data["meta"]
    pin = f", adapter {meta['adapter']}" if meta.get("adapter") else ""
    lines = [f"run {data['run']}: {meta.get('hcp_name', '?')} {meta.get('hcp_digest', '')[:19]}"
             f", agent {meta.get('agent', '?')}{pin}"]
    width = max([len(row["task"]) for row in data["tasks"]] + [4])
    lines.append(f"{'task':<{width}}  passed  failed  errors  mean reward  placement")
    for row in data["tasks"]:
        reward = "-" if row["mean_reward"] is None else f"{row['mean_reward']:.2f}"
        lines.append(f"{row['task']:<{width}}  {row['passed']:>2}/{row['episodes']:<3}  "
                     f"{row['failed']:>6}  {row['errors']:>6}  {reward:>11}  "
                     f"{', '.join(row.get('placement', []))}")
    low, high = data["ci95"]
    lines.append(f"pass rate {_percent(data['pass_rate'])} ({data['passed']}/{data['episodes']}"
                 f"), 95% CI [{_percent(low)}, {_percent(high)}]; {data['errors']} errors")
    each = data["cost"]["per_episode"]
    if data["episodes"]:
        lines.append(f"per episode: {each['prompt_tokens']:g} prompt tokens "
                     f"({each['cached_tokens']:g} cached), {each['completion_tokens']:g} "
                     f"completion tokens, {each['steps']:g} steps, {each['wall_sec']:.1f} s "
                     f"(total {data['cost']['wall_sec']:.0f} s)")
    return "\n".join(lines)


def compare_data(run_a: Path, run_b: Path) -> dict[str, Any]:
    """Both runs' figures and the paired comparison of B against A."""
    a, b = show_data(run_a), show_data(run_b)
    return {"a": public(a), "b": public(b),
            "compare": stats.compare(a["_episodes"], b["_episodes"])}


def compare_text(data: dict[str, Any]) -> str:
    """The paired per-task table and the sign test, for people."""
    found = data["compare"]
    a, b = data["a"], data["b"]
    rows = found["tasks"]
    width = max([len(row["task"]) for row in rows] + [4])
    lines = [f"A {a['run']}: pass rate {_percent(a['pass_rate'])}",
             f"B {b['run']}: pass rate {_percent(b['pass_rate'])}",
             f"{'task':<{width}}  A       B       change"]
    for row in rows:
        lines.append(f"{row['task']:<{width}}  {row['a']['passed']:>2}/{row['a']['episodes']:<4}"
                     f"  {row['b']['passed']:>2}/{row['b']['episodes']:<4}  {row['change']}")
    lines.append(f"{found['improved']} improved, {found['regressed']} regressed, "
                 f"{found['unchanged']} unchanged; sign test p = {found['sign_test_p']:.4g}")
    for side in ("only_a", "only_b"):
        if found[side]:
            lines.append(f"only in {side[-1].upper()}: {', '.join(found[side])}")
    return "\n".join(lines)
