"""The promotion gate: does a candidate's slice show an improvement that is real?

It compares, task by task, the candidate's episodes with the parent's on the affected tasks
(the others are the parent's by construction) and decides:

- **guards**: a task tagged ``guard`` that was solid in the parent (every epoch passed) must
  not fail any epoch under the candidate, else ``reject`` naming it;
- **cost**: tokens (prompt and completion) and the wall time of the agent's part per
  episode (the sandbox's start and the verifier are not the HCP's) may not get worse by
  more than ``[evolve] max_cost_increase``; per task, excess = candidate - parent -
  max(allowance x parent, floor) (the floor: 0 tokens, 1 s), and the cost is worse when
  the mean excess is above 0 with its 95% interval (tasks as clusters) above 0 too
  (``reject``), unclear when only the mean is (``inconclusive``: more epochs);
- **improvement**: per task, the majority outcome over its epochs (a pass when more than
  half passed). With fewer than 30 affected tasks, wins and losses go to an exact
  one-sided sign test at alpha 0.05 (ties dropped); from 30 up, the per-task differences of
  pass rate get a task-clustered 95% t interval that must lie above 0. Then the minimum
  effect: wins minus losses of at least ``min_effect.tasks`` (under 30), or a suite pass
  rate gain of ``min_effect.points`` percentage points (from 30);
- ``promote`` when all hold; ``reject`` with the reason when a guard regressed, the cost
  got worse, or nothing improved (wins do not outnumber losses); else ``inconclusive`` with
  what would decide it (more epochs, a wider slice, a confirmation set).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from mol.eval.stats import mean_interval, sign_test_greater

ALPHA = 0.05
"""The significance level of the improvement test (fixed: a gate one can tune is no gate)."""
CLUSTER_FROM = 30
"""From this many affected tasks on, the interval replaces the sign test."""


@dataclass
class TaskChange:
    """One affected task: its passes over its epochs in the parent and the candidate."""

    task: str
    guard: bool
    parent: list[int]
    """Passes, episodes."""
    candidate: list[int]
    change: str
    """``win``, ``loss`` or ``tie`` (of the majority outcomes)."""
    difference: float
    """Candidate pass rate minus the parent's."""


@dataclass
class Verdict:
    """The gate's decision with its evidence."""

    outcome: str
    """``promote``, ``reject`` or ``inconclusive``."""
    reason: str
    evidence: dict[str, Any] = field(default_factory=dict)
    needs: list[str] = field(default_factory=list)
    """For ``inconclusive``: what more evidence would decide it."""

    def to_dict(self) -> dict[str, Any]:
        """The verdict as JSON-able data."""
        return asdict(self)


def decide(parent: list[Any], candidate: list[Any], affected: list[str], guards: set[str],
           suite_tasks: int, config: Any) -> Verdict:
    """The gate over the affected tasks' episodes (``Episode`` rows of each run)."""
    changes = [_change(task, parent, candidate, task in guards) for task in sorted(affected)]
    wins = sum(c.change == "win" for c in changes)
    losses = sum(c.change == "loss" for c in changes)
    evidence: dict[str, Any] = {
        "tasks": len(changes), "suite_tasks": suite_tasks, "wins": wins, "losses": losses,
        "ties": len(changes) - wins - losses, "per_task": [asdict(c) for c in changes]}
    if not changes:
        return Verdict("inconclusive", "the edit changes no episode of this suite", evidence,
                       ["a wider slice: tasks whose episodes read what the edit touches"])
    broken = [c for c in changes if c.guard and c.parent[0] == c.parent[1] > 0
              and c.candidate[0] < c.candidate[1]]
    evidence["guards"] = [{"task": c.task, "parent": c.parent, "candidate": c.candidate,
                           "regressed": c in broken} for c in changes if c.guard]
    if broken:
        named = ", ".join(f"{c.task} ({c.parent[0]}/{c.parent[1]} -> "
                          f"{c.candidate[0]}/{c.candidate[1]})" for c in broken)
        return Verdict("reject", f"guard regressed: {named}", evidence)
    cost, cost_unclear = _cost(parent, candidate, affected, config.max_cost_increase)
    evidence["cost"] = cost
    worse = [f"{name} per episode {c['change']:+.0%} (allowed {config.max_cost_increase:+.0%})"
             for name, c in cost.items() if c["verdict"] == "worse"]
    if worse:
        return Verdict("reject", "cost: " + "; ".join(worse), evidence)
    verdict = _improvement(changes, wins, losses, suite_tasks, config, evidence)
    if verdict.outcome == "promote" and cost_unclear:
        return Verdict("inconclusive", f"improves, but the cost may be worse: "
                       f"{', '.join(cost_unclear)}", evidence,
                       ["more epochs (--epochs K): the cost difference is within noise"])
    return verdict


def _change(task: str, parent: list[Any], candidate: list[Any], guard: bool) -> TaskChange:
    def tally(rows: list[Any]) -> list[int]:
        mine = [r for r in rows if r.task == task]
        return [sum(r.outcome == "pass" for r in mine), len(mine)]

    a, b = tally(parent), tally(candidate)
    before, after = a[0] * 2 > a[1], b[0] * 2 > b[1]
    change = "win" if after and not before else "loss" if before and not after else "tie"
    rate = (b[0] / b[1] if b[1] else 0.0) - (a[0] / a[1] if a[1] else 0.0)
    return TaskChange(task, guard, a, b, change, round(rate, 6))


def _improvement(changes: list[TaskChange], wins: int, losses: int, suite_tasks: int,
                 config: Any, evidence: dict[str, Any]) -> Verdict:
    """The improvement test and the minimum effect."""
    net = wins - losses
    points = 100 * sum(c.difference for c in changes) / max(1, suite_tasks)
    evidence["effect"] = {"tasks": net, "points": round(points, 3)}
    evidence["min_effect"] = config.min_effect.model_dump()
    evidence["alpha"] = ALPHA
    if len(changes) < CLUSTER_FROM:
        p = sign_test_greater(wins, losses)
        evidence.update(test="sign", p=round(p, 6))
        if net <= 0:
            return Verdict("reject", f"no improvement: {wins} wins, {losses} losses "
                           f"(sign test p = {p:.3g})", evidence)
        if p > ALPHA:
            more = _wins_needed(wins, losses)
            return Verdict("inconclusive", f"{wins} wins, {losses} losses: sign test p = "
                           f"{p:.3g} > {ALPHA}", evidence, [
                               f"a wider slice or a confirmation set: {more} more wins "
                               f"without a loss would give p = "
                               f"{sign_test_greater(wins + more, losses):.3g}",
                               "more epochs (--epochs K): majority outcomes over more "
                               "epochs separate an effect from noise"])
        if net < config.min_effect.tasks:
            return Verdict("inconclusive", f"significant, but {net} net wins < the minimum "
                           f"effect of {config.min_effect.tasks}", evidence,
                           ["a wider slice: more tasks the edit improves"])
        return Verdict("promote", f"{wins} wins, {losses} losses: sign test p = {p:.3g} "
                       f"<= {ALPHA}", evidence)
    mean, low, high = mean_interval([c.difference for c in changes])
    evidence.update(test="interval", mean=round(mean, 6), interval=[round(low, 6),
                                                                    round(high, 6)])
    if mean <= 0:
        return Verdict("reject", f"no improvement: mean per-task difference {mean:+.3f}",
                       evidence)
    if low <= 0:
        return Verdict("inconclusive", f"mean per-task difference {mean:+.3f}, 95% interval "
                       f"[{low:+.3f}, {high:+.3f}] includes 0", evidence,
                       ["more epochs (--epochs K) or a wider slice: the interval must "
                        "exclude 0"])
    if points < config.min_effect.points:
        return Verdict("inconclusive", f"significant, but +{points:.2f} points < the minimum "
                       f"effect of {config.min_effect.points:g}", evidence,
                       ["a wider slice: more tasks the edit improves"])
    return Verdict("promote", f"mean per-task difference {mean:+.3f}, 95% interval "
                   f"[{low:+.3f}, {high:+.3f}]: +{points:.2f} points", evidence)


def _wins_needed(wins: int, losses: int) -> int:
    """How many more wins (without a loss) the sign test needs to reach ``ALPHA``."""
    more = 1
    while sign_test_greater(wins + more, losses) > ALPHA:
        more += 1
    return more


COSTS = {"tokens": (lambda r: r.prompt_tokens + r.completion_tokens, 0.0),
         "agent_sec": (lambda r: r.agent_sec, 1.0)}
"""Each cost per episode, and the difference below which it is never worse: tokens are
counted exactly; the agent's wall time is measured on a machine that does other things, and
a second per episode is below what it measures reliably."""


def _cost(parent: list[Any], candidate: list[Any], affected: list[str],
          allowance: float) -> tuple[dict[str, Any], list[str]]:
    """Per-episode cost of each kind on the affected tasks, with its verdict (``ok``,
    ``unclear`` or ``worse``), and the unclear kinds."""
    found: dict[str, Any] = {}
    unclear = []
    for name, (measure, floor) in COSTS.items():
        excess, before, after = [], [], []
        for task in affected:
            a = [measure(r) for r in parent if r.task == task]
            b = [measure(r) for r in candidate if r.task == task]
            if a and b:
                before.append(sum(a) / len(a))
                after.append(sum(b) / len(b))
                excess.append(after[-1] - before[-1] - max(allowance * before[-1], floor))
        mean, low, _ = mean_interval(excess)
        verdict = "ok" if mean <= 0 else "worse" if low > 0 and len(excess) > 1 else "unclear"
        old, new = sum(before) / max(1, len(before)), sum(after) / max(1, len(after))
        found[name] = {"parent": round(old, 3), "candidate": round(new, 3),
                       "change": round(new / old - 1, 6) if old else 0.0, "verdict": verdict}
        if verdict == "unclear":
            unclear.append(f"{name} per episode {found[name]['change']:+.0%}")
    return found, unclear
