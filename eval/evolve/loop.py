"""``mol evolve run``: rounds of propose, evaluate and promote, within a budget.

Each round proposes up to ``n`` candidates against the current parent and its run (a file
proposer takes the first ``n`` of its patches that still change the parent and were not
evaluated against this run yet), evaluates each, and promotes the best ``promote`` (most net
wins, then most points). When several candidates were evaluated, the best of them is
promoted only after a confirmation run on tasks not used to select it: ``confirm``, a suite
the parent is run on once (its run is kept in the lab) and the winner is evaluated against.
The promoted HCP and its run (the candidate's, inherited episodes included) are the next
round's parent. The loop stops after ``rounds``, when a round promotes nothing, or when the
budget (episodes, tokens, seconds; checked before each evaluation) is spent.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mol.eval.evolve.evaluate import EvaluateOptions, evaluate
from mol.eval.evolve.lab import Candidate, Lab, resolved
from mol.eval.evolve.promote import promote
from mol.eval.evolve.propose import Proposed


@dataclass
class Budget:
    """Most episodes, tokens and seconds a loop may spend (None: no limit)."""

    episodes: int | None = None
    tokens: int | None = None
    seconds: float | None = None


@dataclass
class LoopOptions:
    """What ``mol evolve run`` was asked to do."""

    lab: Lab
    hcp: Path
    run: Path
    proposer: str
    n: int = 1
    rounds: int = 1
    epochs: int | None = None
    engine_url: str | None = None
    jobs: int = 1
    budget: Budget = field(default_factory=Budget)
    confirm: Path | None = None
    to: Path | None = None
    """Promotions go to ``to/ROUND-DIGEST``; default: the lab's ``promoted/``."""
    progress: Callable[[], Any] | None = None
    say: Callable[[str], None] = lambda line: None


@dataclass
class _Spent:
    episodes: int = 0
    tokens: int = 0
    started: float = field(default_factory=time.monotonic)

    def over(self, budget: Budget) -> str | None:
        seconds = time.monotonic() - self.started
        for name, used, limit in (("episodes", self.episodes, budget.episodes),
                                  ("tokens", self.tokens, budget.tokens),
                                  ("seconds", seconds, budget.seconds)):
            if limit is not None and used >= limit:
                return f"the budget of {limit:g} {name} is spent ({used:g})"
        return None

    def add(self, evaluation: dict[str, Any]) -> None:
        if not evaluation.get("reused"):
            self.episodes += sum(evaluation["episodes_run"].values())
            self.tokens += evaluation["tokens_run"]


async def run_rounds(options: LoopOptions) -> dict[str, Any]:
    """Run the rounds; returns what happened (``mol evolve run --json``)."""
    from mol.hcp.loader import load

    spent, rounds = _Spent(), []
    hcp, run = Path(options.hcp), resolved(options.run)
    lineage = [load(hcp).digest]
    stopped = f"{options.rounds} rounds done"
    for number in range(1, options.rounds + 1):
        parent = load(hcp)
        proposed = await _propose(options, parent, hcp, run)
        entry: dict[str, Any] = {"round": number, "parent": parent.digest,
                                 "dropped": proposed.dropped, "candidates": [],
                                 "promoted": None}
        rounds.append(entry)
        options.say(f"round {number}: {len(proposed.candidates)} candidates against "
                    f"{parent.digest[:19]} ({len(proposed.dropped)} dropped)")
        if not proposed.candidates:
            stopped = f"round {number}: no valid candidate"
            break
        why = await _evaluate_all(options, proposed.candidates, run, spent, entry)
        winner = _best(options, proposed.candidates, run)
        if why is not None or winner is None:
            stopped = why or f"round {number}: nothing promoted"
            break
        if len(proposed.candidates) > 1:
            why = await _confirm(options, winner, parent, spent)
            if why is not None:
                stopped = f"round {number}: {why}"
                break
        to = options.to / f"{number}-{winner.record['digest'][7:19]}" if options.to else None
        promoted = promote(options.lab, winner, to)
        entry["promoted"] = winner.id
        options.say(f"round {number}: promoted {winner.id} as {promoted['digest'][:19]} "
                    f"({promoted['hcp']})")
        lineage.append(promoted["digest"])
        hcp, run = Path(promoted["hcp"]), Path(winner.evaluation(run)["candidate_run"])
    return {"rounds": rounds, "lineage": lineage, "stopped": stopped,
            "spent": {"episodes": spent.episodes, "tokens": spent.tokens,
                      "seconds": round(time.monotonic() - spent.started, 3)}}


async def _propose(options: LoopOptions, parent: Any, hcp: Path, run: Path) -> Proposed:
    """This round's candidates."""
    from mol.eval.evolve.propose import propose
    from mol.eval.evolve.proposers import parse_proposer, read_file

    kind, value = parse_proposer(options.proposer)
    if kind == "adapter":
        from mol.eval.evolve.propose import from_adapter

        return await from_adapter(options.lab, parent, hcp, run, value, options.n,
                                  options.engine_url)
    tried = {json.dumps(c.record["patch"], sort_keys=True) for c in options.lab.candidates()
             if c.record["parent"] == parent.digest and c.evaluation(run) is not None}
    fresh = [p for p in read_file(Path(value))
             if json.dumps(p.patch, sort_keys=True) not in tried]
    checked = propose(options.lab, parent, hcp, run, [], trusted=True)
    for proposal in fresh:
        if len(checked.candidates) >= options.n:
            break
        one = propose(options.lab, parent, hcp, run, [proposal], trusted=True)
        checked.candidates += one.candidates
        checked.dropped += one.dropped
    _one_batch(options.lab, checked)
    return checked


def _one_batch(lab: Lab, proposed: Proposed) -> None:
    """Make the candidates chosen together one batch (they were validated one by one)."""
    from mol.eval.evolve.lab import write_json

    for candidate in proposed.candidates:
        batches = candidate.record.setdefault("batches", [candidate.record["batch"]])
        if proposed.batch not in batches:
            batches.append(proposed.batch)
            write_json(candidate.folder / "candidate.json", candidate.record)


async def _evaluate_all(options: LoopOptions, candidates: list[Candidate], run: Path,
                        spent: _Spent, entry: dict[str, Any]) -> str | None:
    """Evaluate each candidate against ``run``; why the loop must stop, if it must."""
    for candidate in candidates:
        over = spent.over(options.budget)
        if over is not None:
            return over
        evaluation = await evaluate(EvaluateOptions(
            options.lab, candidate.id, run, options.epochs, options.engine_url, options.jobs,
            options.progress))
        spent.add(evaluation)
        entry["candidates"].append({k: evaluation.get(k) for k in (
            "candidate", "outcome", "reason", "needs", "episodes_run", "episodes_full",
            "reused")})
        options.say(f"  {candidate.id}: {evaluation['outcome']}: {evaluation['reason']} "
                    f"({sum(evaluation['episodes_run'].values())} episodes run of "
                    f"{evaluation['episodes_full']})")
    return None


def _best(options: LoopOptions, candidates: list[Candidate], run: Path) -> Candidate | None:
    """The candidate with the most net wins (then points) among those the gate promotes."""
    scored = []
    for candidate in candidates:
        current = options.lab.get(candidate.id)
        evaluation = current.evaluation(run)
        if evaluation and evaluation["outcome"] == "promote":
            effect = evaluation["evidence"].get("effect", {})
            scored.append(((effect.get("tasks", 0), effect.get("points", 0)), current))
    return max(scored, key=lambda s: s[0])[1] if scored else None


async def _confirm(options: LoopOptions, winner: Candidate, parent: Any,
                   spent: _Spent) -> str | None:
    """Confirm the best of several on ``options.confirm``; why not, if it is not confirmed."""
    from mol.eval.runner import RunOptions, run_suite

    if options.confirm is None:
        return (f"the best of several ({winner.id}) needs a confirmation run on tasks not "
                "used to select it (--confirm SUITE)")
    over = spent.over(options.budget)
    if over is not None:
        return over
    held_out = options.lab.folder / "confirm" / f"{parent.digest[7:19]}-{options.confirm.name}"

    def counted(episode: Any) -> None:
        spent.episodes += 1
        spent.tokens += episode.prompt_tokens + episode.completion_tokens

    await run_suite(RunOptions(Path(options.confirm), parent, held_out, options.jobs,
                               epochs=options.epochs or 1, engine_url=options.engine_url),
                    progress=options.progress() if options.progress else None,
                    on_episode=counted)
    evaluation = await evaluate(EvaluateOptions(
        options.lab, winner.id, held_out, options.epochs, options.engine_url, options.jobs,
        options.progress))
    spent.add(evaluation)
    options.say(f"  {winner.id} on {options.confirm}: {evaluation['outcome']}: "
                f"{evaluation['reason']}")
    if evaluation["outcome"] != "promote":
        return f"{winner.id} is not confirmed: {evaluation['outcome']}: {evaluation['reason']}"
    return None
