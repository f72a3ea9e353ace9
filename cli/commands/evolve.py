"""``mol evolve``: propose HCP edits, evaluate them on the slice they can affect, promote the
ones the gate accepts, show the lineage (docs/evolve.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from mol.core.errors import EvalError, UsageError


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``mol evolve`` subcommands."""
    sub = parser.add_subparsers(dest="evolve_command", metavar="SUBCOMMAND", required=True)

    p = sub.add_parser("propose", help="candidate edits of an HCP, as patches, validated",
                       description="Propose candidate edits (RFC 6902 patches against the "
                       "HCP's evolve document) from a file or an adapter, validate them and "
                       "record the valid ones in the lab.")
    _parent(p)
    p.add_argument("--proposer", required=True, metavar="KIND:WHAT",
                   help="file:PATCHES.json or adapter:NAME")
    p.add_argument("-n", type=int, default=3, metavar="K", help="most candidates an adapter "
                   "proposes (default 3)")
    _common(p)
    p.set_defaults(func=propose)

    p = sub.add_parser("evaluate", help="run a candidate on the slice it can affect and apply "
                       "the gate")
    p.add_argument("--run", type=Path, required=True, help="the parent's run folder")
    p.add_argument("--candidate", required=True, metavar="ID", help="the candidate (its id "
                   "or a prefix)")
    p.add_argument("--epochs", type=int, metavar="K", help="epochs per affected task "
                   "(default: the parent run's)")
    p.add_argument("-j", "--jobs", type=int, default=1, metavar="N",
                   help="episodes run at once (default 1)")
    _common(p)
    p.set_defaults(func=evaluate)

    p = sub.add_parser("promote", help="write a promoted candidate's HCP (parent = the old "
                       "digest)")
    p.add_argument("candidate", metavar="ID", help="the candidate (its id or a prefix)")
    p.add_argument("--to", type=Path, metavar="DIR", help="where (default: LAB/promoted/DIGEST)")
    _common(p, engine=False)
    p.set_defaults(func=promote)

    p = sub.add_parser("log", help="the lineage: HCPs by digest, candidates, outcomes, evidence")
    _common(p, engine=False)
    p.set_defaults(func=log)

    p = sub.add_parser("run", help="rounds of propose, evaluate and promote, within a budget")
    _parent(p)
    p.add_argument("--proposer", required=True, metavar="KIND:WHAT",
                   help="file:PATCHES.json or adapter:NAME")
    p.add_argument("-n", type=int, default=1, metavar="K", help="candidates per round "
                   "(default 1)")
    p.add_argument("--rounds", type=int, default=3, metavar="N", help="most rounds (default 3)")
    p.add_argument("--epochs", type=int, metavar="K", help="epochs per affected task")
    p.add_argument("-j", "--jobs", type=int, default=1, metavar="N",
                   help="episodes run at once (default 1)")
    p.add_argument("--budget-episodes", type=int, metavar="N", help="most episodes to run")
    p.add_argument("--budget-tokens", type=int, metavar="N", help="most tokens to spend")
    p.add_argument("--budget-seconds", type=float, metavar="S", help="most seconds to take")
    p.add_argument("--confirm", type=Path, metavar="SUITE", help="tasks to confirm the best "
                   "of several candidates on (not used to select it)")
    p.add_argument("--to", type=Path, metavar="DIR", help="promotions go to DIR/ROUND-DIGEST")
    _common(p)
    p.set_defaults(func=run)


def _parent(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", type=Path, required=True, help="the parent HCP's run folder")
    p.add_argument("--hcp", type=Path, required=True, metavar="FILE", help="the parent HCP")


def _common(p: argparse.ArgumentParser, engine: bool = True) -> None:
    p.add_argument("--lab", type=Path, metavar="DIR", help="the lab folder (default: "
                   "$MOL_EVOLVE_LAB, else ~/.local/state/mol/evolve)")
    if engine:
        p.add_argument("--engine-url", help="engine base URL, overriding engine.api_base")
    p.add_argument("--json", action="store_true", help="print JSON")


def _lab(args: argparse.Namespace) -> Any:
    import os

    from mol.eval.evolve.lab import Lab, default_lab

    return Lab(args.lab or Path(os.environ.get("MOL_EVOLVE_LAB") or default_lab()))


def _print_json(data: Any) -> None:
    print(json.dumps(data, ensure_ascii=False, default=str), flush=True)


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _progress() -> Any:
    from mol.eval.progress import Progress

    return Progress(0, live=sys.stderr.isatty())


def _parent_of(args: argparse.Namespace) -> Any:
    """The parent HCP, checked to be what the run ran."""
    from mol.cli.commands.common import load_artifact
    from mol.eval.store import Store

    parent = load_artifact(args.hcp)
    with Store(args.run, create=False) as store:
        meta = store.meta()
    ran = meta.get("behaviour_digest")
    if ran != parent.behaviour_digest:
        raise UsageError(f"--run {args.run} is a run of another HCP (behaviour {ran}), not of "
                         f"{args.hcp} ({parent.behaviour_digest})")
    return parent


async def propose(args: argparse.Namespace) -> int:
    """Propose, validate and record candidates; list them and the dropped ones."""
    from mol.eval.evolve.propose import from_adapter
    from mol.eval.evolve.propose import propose as validate
    from mol.eval.evolve.proposers import parse_proposer, read_file

    kind, value = parse_proposer(args.proposer)
    parent, lab = _parent_of(args), _lab(args)
    if kind == "file":
        result = validate(lab, parent, args.hcp, args.run, read_file(Path(value)), trusted=True)
    else:
        result = await from_adapter(lab, parent, args.hcp, args.run, value, args.n,
                                    args.engine_url)
    if args.json:
        _print_json(result.to_dict())
    else:
        for candidate in result.candidates:
            note = f" ({candidate.record['note']})" if candidate.record["note"] else ""
            print(f"candidate {candidate.id}: touches {', '.join(candidate.record['touched'])}"
                  f"{note}")
        for dropped in result.dropped:
            where = "" if dropped["index"] is None else f" {dropped['index']}"
            print(f"dropped{where}: {dropped['reason']}", file=sys.stderr)
    if not result.candidates:
        reasons = "; ".join(d["reason"] for d in result.dropped) or "none proposed"
        error = UsageError if kind == "file" else EvalError
        raise error(f"no valid candidate ({reasons})")
    return 0


async def evaluate(args: argparse.Namespace) -> int:
    """Evaluate a candidate; print the slice, the episodes run and the verdict."""
    from mol.eval.evolve.evaluate import EvaluateOptions
    from mol.eval.evolve.evaluate import evaluate as judge

    if args.jobs < 1:
        raise UsageError("-j takes a positive number")
    result = await judge(EvaluateOptions(_lab(args), args.candidate, args.run, args.epochs,
                                         args.engine_url, args.jobs, _progress))
    if args.json:
        _print_json(result)
        return 0
    print(evaluation_text(result))
    return 0


def evaluation_text(e: dict[str, Any]) -> str:
    """An evaluation for people."""
    counts, ran = e["slice"], e["episodes_run"]
    total = counts["affected"] + counts["unaffected_by_replay"] + counts["unaffected_by_reads"]
    lines = [f"candidate {e['candidate']} against {e['run']} ({e['role']}"
             f"{', evaluated before' if e.get('reused') else ''})",
             f"touched: {', '.join(e['slice']['touched'])}",
             f"slice: {counts['affected']} of {total} tasks affected "
             f"({counts['unaffected_by_reads']} unaffected by their reads, "
             f"{counts['unaffected_by_replay']} by replay)",
             f"episodes run: {ran['candidate']} under the candidate, {ran['parent']} more of "
             f"the parent; a full re-evaluation runs {e['episodes_full']} "
             f"({e['inherited']} inherited)",
             f"gate: {e['outcome']}: {e['reason']}"]
    lines += [f"  needs: {need}" for need in e.get("needs") or []]
    return "\n".join(lines)


def promote(args: argparse.Namespace) -> int:
    """Promote a candidate."""
    from mol.eval.evolve.promote import promote as write

    lab = _lab(args)
    promoted = write(lab, lab.get(args.candidate), args.to)
    if args.json:
        _print_json(promoted)
    else:
        print(f"{promoted['hcp']}: {promoted['digest']} (parent {promoted['parent']})")
    return 0


def log(args: argparse.Namespace) -> int:
    """Print the lineage."""
    from mol.eval.evolve.promote import lineage, lineage_text

    tree = lineage(_lab(args))
    if args.json:
        _print_json(tree)
    else:
        print(lineage_text(tree))
    return 0


async def run(args: argparse.Namespace) -> int:
    """Rounds of propose, evaluate, promote."""
    from mol.eval.evolve.loop import Budget, LoopOptions, run_rounds

    if args.rounds < 1 or args.n < 1 or args.jobs < 1:
        raise UsageError("--rounds, -n and -j take a positive number")
    _parent_of(args)
    result = await run_rounds(LoopOptions(
        _lab(args), args.hcp, args.run, args.proposer, args.n, args.rounds, args.epochs,
        args.engine_url, args.jobs, Budget(args.budget_episodes, args.budget_tokens,
                                           args.budget_seconds),
        args.confirm, args.to, _progress, _say))
    if args.json:
        _print_json(result)
    else:
        print(f"lineage: {' -> '.join(d[:19] for d in result['lineage'])}")
        print(f"stopped: {result['stopped']}; spent {result['spent']['episodes']} episodes, "
              f"{result['spent']['tokens']} tokens, {result['spent']['seconds']:.0f} s")
    return 0
