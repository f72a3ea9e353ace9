"""The verifier: ``tests/test.sh`` run after the agent, in the same container.

As in Harbor: ``/tests`` and ``/logs/verifier`` are emptied (so the agent cannot plant a
reward), the task's ``tests/`` is uploaded to ``/tests``, and ``bash /tests/test.sh`` runs
from the working folder with a clean environment, in a shell that has none of the
agent's shell state (its functions could otherwise fake the result), its output teed to
``/logs/verifier/test-stdout.txt``, under ``[verifier] timeout_sec``. It writes a number
to ``/logs/verifier/reward.txt`` or ``{"reward": N}`` (or one named number) to
``reward.json``. A reward at or above the pass threshold (default 1) passes; below
fails; a timeout, a crash without a reward or an unreadable reward is an ``error``.
"""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import dataclass
from typing import Any

from mol.eval.tasks import Task
from mol.hcp.snapshot import folder_entries

MOUNTS = ("/tests", "/logs")
"""Folders an eval sandbox has besides the workspace (tmpfs, owned by the sandbox user);
an oracle episode also gets ``/solution``."""

CLEAN_ENV = ("env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "
             "HOME=/tmp LANG=C.UTF-8 TERM=dumb")
"""What the verifier's ``bash`` starts from: nothing the agent exported leaks into it."""

_SPLIT = "__mol_verifier_rewards__"
"""The line between the tests' output and the listing of the reward files."""

_READ_REWARD = ("cd /logs/verifier && for f in reward.txt reward.json; do "
                "[ -f \"$f\" ] && { printf '=== %s\\n' \"$f\"; head -c 4096 \"$f\"; echo; }; "
                "done; true")


@dataclass(frozen=True)
class Verdict:
    """What the verifier decided."""

    outcome: str
    """``pass``, ``fail`` or ``error``."""
    reward: float | None = None
    reason: str = ""
    error: str = ""
    exit_code: int | None = None
    output: str = ""


async def verify(sandbox: Any, task: Task) -> Verdict:
    """Run ``task``'s verifier in ``sandbox`` (after the agent) and judge the reward."""
    await sandbox.upload("/tests", folder_entries(task.path / "tests"), clear=True)
    # One command empties /logs/verifier, runs the tests, then lists the reward files
    # after a line of its own (the last such line: the tests' output all comes before
    # it, as ``tee`` ends only when every writer to its pipe has): with the upload, two
    # shell round trips per episode instead of four. It exits with the tests' status.
    command = ("( rm -rf /logs/verifier; mkdir -p /logs/verifier /logs/agent; "
               f"cd {shlex.quote(sandbox.workspace)} && ( set -o pipefail; {CLEAN_ENV} bash "
               "/tests/test.sh 2>&1 | tee /logs/verifier/test-stdout.txt ); __mol_status=$?; "
               f"printf '\\n%s\\n' {_SPLIT}; {_READ_REWARD}; exit $__mol_status )")
    timeout = task.config.verifier_timeout
    # A clean shell: nothing the agent defined (functions, aliases, PATH) stands in for
    # the commands above, and the agent's shell state is left as it was.
    run = await sandbox.run(command, timeout=timeout, clean=True)
    output, found, listing = run.output.rpartition(f"\n{_SPLIT}\n")
    if not found:  # cut short (a timeout): what it printed is the tests' output alone
        output, listing = run.output, ""
    tail = output[-2000:]
    if run.timed_out:
        return Verdict("error", None, "verifier", f"the verifier timed out after {timeout:g} s",
                       None, tail)
    try:
        reward = parse_reward(listing)
    except ValueError as exc:
        return Verdict("error", None, "verifier", str(exc), run.exit_code, tail)
    if reward is None:
        why = (f"the verifier crashed (exit {run.exit_code}) without writing a reward"
               if run.exit_code else "the verifier wrote no reward (reward.txt or reward.json)")
        return Verdict("error", None, "verifier", why, run.exit_code, tail)
    threshold = task.config.pass_threshold
    if reward >= threshold:
        return Verdict("pass", reward, "", "", run.exit_code, tail)
    return Verdict("fail", reward, "reward", f"reward {reward:g} < {threshold:g}",
                   run.exit_code, tail)


def parse_reward(listing: str) -> float | None:
    """The reward from ``=== reward.txt`` / ``=== reward.json`` sections (txt wins);
    ``None`` when there is neither; ``ValueError`` saying what is wrong with one."""
    sections: dict[str, str] = {}
    current = None
    for line in listing.splitlines():
        if line.startswith("=== reward."):
            current = line[4:]
            sections[current] = ""
        elif current is not None:
            sections[current] += line + "\n"
    if "reward.txt" in sections:
        text = sections["reward.txt"].strip()
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"reward.txt holds {text[:60]!r}, not a number") from None
        return _finite(value, "reward.txt")
    if "reward.json" in sections:
        return _from_json(sections["reward.json"])
    return None


def _from_json(text: str) -> float:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"reward.json is not JSON ({exc.msg})") from None
    if isinstance(value, dict):
        numbers = {k: v for k, v in value.items()
                   if isinstance(v, int | float) and not isinstance(v, bool)}
        if "reward" in numbers:
            value = numbers["reward"]
        elif len(numbers) == 1:
            value = next(iter(numbers.values()))
        else:
            raise ValueError(f"reward.json needs a 'reward' number (or exactly one number), "
                             f"got keys {sorted(value)[:8]}")
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ValueError(f"reward.json holds {type(value).__name__}, not a number")
    return _finite(float(value), "reward.json")


def _finite(value: float, where: str) -> float:
    if not math.isfinite(value):
        raise ValueError(f"{where} holds {value}, not a finite number")
    return value
