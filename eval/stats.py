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
