"""The figures of a run and of two runs side by side.

- **pass rate**: passed episodes over all episodes (an error is not a pass), with a
  Wilson score 95% interval;
- **per task**: passes over its epochs (and fails, errors, the mean reward);
- **cost**: tokens (prompt, completion, cached), steps and wall time, in total and per
  episode;
- **compare**: per task present in both runs, its pass rate in B against A: improved,
  regressed or unchanged; an exact two-sided sign test over the improved and regressed
  tasks (ties dropped): ``p = min(1, 2 * P[X <= min(k, n - k)])``, ``X ~ Binomial(n, 1/2)``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from mol.eval.store import Episode

Z95 = 1.959963984540054
"""The standard normal's 97.5% quantile."""


def wilson(passed: int, total: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of ``passed`` successes in ``total`` trials."""
    if total == 0:
        return 0.0, 1.0
    p = passed / total
    denominator = 1 + z * z / total
    center = (p + z * z / (2 * total)) / denominator
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denominator
    return max(0.0, center - half), min(1.0, center + half)


def sign_test(improved: int, regressed: int) -> float:
    """Exact two-sided sign test p-value (1.0 when nothing changed)."""
    n = improved + regressed
    if n == 0:
        return 1.0
    k = min(improved, regressed)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def per_task(episodes: Iterable[Episode]) -> dict[str, dict[str, Any]]:
    """Task -> episodes, passed, failed, errors, mean reward (over rewarded episodes)."""
    table: dict[str, dict[str, Any]] = {}
    for episode in episodes:
        row = table.setdefault(episode.task, {"task": episode.task, "episodes": 0, "passed": 0,
                                              "failed": 0, "errors": 0, "rewards": []})
        row["episodes"] += 1
        row[{"pass": "passed", "fail": "failed"}.get(episode.outcome, "errors")] += 1
        if episode.reward is not None:
            row["rewards"].append(episode.reward)
    for row in table.values():
        rewards = row.pop("rewards")
        row["mean_reward"] = round(sum(rewards) / len(rewards), 6) if rewards else None
    return dict(sorted(table.items()))


def summary(episodes: list[Episode]) -> dict[str, Any]:
    """Per-task table, pass rate with its interval, and cost figures of ``episodes``."""
    count = len(episodes)
    passed = sum(e.outcome == "pass" for e in episodes)
    low, high = wilson(passed, count)
    totals = {key: sum(getattr(e, key) for e in episodes)
              for key in ("prompt_tokens", "completion_tokens", "cached_tokens", "steps")}
    wall = sum(e.wall_sec for e in episodes)
    return {
        "tasks": list(per_task(episodes).values()),
        "episodes": count,
        "passed": passed,
        "failed": sum(e.outcome == "fail" for e in episodes),
        "errors": sum(e.outcome == "error" for e in episodes),
        "pass_rate": round(passed / count, 6) if count else None,
        "ci95": [round(low, 6), round(high, 6)],
        "cost": {**totals, "wall_sec": round(wall, 3),
                 "per_episode": {key: round(value / count, 3) if count else None
                                 for key, value in {**totals, "wall_sec": wall}.items()}},
    }


def compare(a: list[Episode], b: list[Episode]) -> dict[str, Any]:
    """Paired per-task differences of run B against run A, with the sign test."""
    left, right = per_task(a), per_task(b)
    rows, counts = [], {"improved": 0, "regressed": 0, "unchanged": 0}
    for task in sorted(set(left) & set(right)):
        rate_a = left[task]["passed"] / left[task]["episodes"]
        rate_b = right[task]["passed"] / right[task]["episodes"]
        change = "improved" if rate_b > rate_a else "regressed" if rate_b < rate_a else \
            "unchanged"
        counts[change] += 1
        rows.append({"task": task, "change": change,
                     "a": {k: left[task][k] for k in ("passed", "episodes")},
                     "b": {k: right[task][k] for k in ("passed", "episodes")},
                     "difference": round(rate_b - rate_a, 6)})
    return {"tasks": rows, **counts,
            "sign_test_p": round(sign_test(counts["improved"], counts["regressed"]), 6),
            "only_a": sorted(set(left) - set(right)), "only_b": sorted(set(right) - set(left))}


def sign_test_greater(wins: int, losses: int) -> float:
    """Exact one-sided sign test: ``P[X >= wins]`` with ``X ~ Binomial(wins + losses, 1/2)``
    (1.0 when nothing changed)."""
    n = wins + losses
    if n == 0:
        return 1.0
    return sum(math.comb(n, i) for i in range(wins, n + 1)) / 2 ** n


T975 = (12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004,
        2.262157, 2.228139, 2.200985, 2.178813, 2.160369, 2.144787, 2.131450, 2.119905,
        2.109816, 2.100922, 2.093024, 2.085963, 2.079614, 2.073873, 2.068658, 2.063899,
        2.059539, 2.055529, 2.051831, 2.048407, 2.045230, 2.042272)
"""Student's t 97.5% quantiles for 1..30 degrees of freedom."""


def t975(df: int) -> float:
    """Student's t 97.5% quantile: the table up to 30 degrees of freedom, then the
    Cornish-Fisher expansion in 1/df (Abramowitz and Stegun 26.7.5; error below 1e-5)."""
    if df < 1:
        raise ValueError("a t quantile needs at least one degree of freedom")
    if df <= len(T975):
        return T975[df - 1]
    z = Z95
    g1 = (z ** 3 + z) / 4
    g2 = (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96
    g3 = (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384
    g4 = (79 * z ** 9 + 776 * z ** 7 + 1482 * z ** 5 - 1920 * z ** 3 - 945 * z) / 92160
    return z + g1 / df + g2 / df ** 2 + g3 / df ** 3 + g4 / df ** 4


def mean_interval(values: list[float]) -> tuple[float, float, float]:
    """``(mean, low, high)``: the mean of ``values`` (one per task: the task is the cluster)
    with its 95% t interval; the interval is the mean itself for fewer than two values."""
    n = len(values)
    if n == 0:
        return 0.0, 0.0, 0.0
    mean = sum(values) / n
    if n < 2:
        return mean, mean, mean
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = t975(n - 1) * sd / math.sqrt(n)
    return mean, mean - half, mean + half
