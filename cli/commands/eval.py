"""``mol eval``: run task suites in sandboxes, replay recorded runs, show and compare them."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from mol.cli.commands.common import add_engine_check_argument, add_hcp_argument, load_artifact


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``mol eval`` subcommands."""
    sub = parser.add_subparsers(dest="eval_command", metavar="SUBCOMMAND", required=True)

    p = sub.add_parser("run", help="run a suite's tasks in sandboxes and record every episode",
                       description="Run every task of SUITE (a folder of Harbor-layout task "
                       "folders) EPOCHS times: a fresh sandbox per episode, the instruction "
                       "as a turn through the harness (or the oracle solution), then the "
                       "verifier. Finished episodes already in --out are skipped.")
    p.add_argument("suite", type=Path, help="folder of task folders (or one task folder)")
    add_hcp_argument(p)
    p.add_argument("--out", type=Path, metavar="DIR", help="the run folder (default: under "
                   "~/.local/state/mol/eval, named by suite, agent and HCP digest)")
    p.add_argument("-j", "--jobs", type=int, metavar="N", help="episodes run at once "
                   "(default 1; with --ray: as many as the cluster has sandbox slots, and "
                   "the slots of --ray local)")
    p.add_argument("--epochs", type=int, default=1, metavar="K",
                   help="runs of each task (default 1)")
    p.add_argument("--tasks", metavar="GLOB", help="only the tasks whose name matches")
    p.add_argument("--agent", default="mol", choices=("mol", "oracle"),
                   help="mol: the harness answers; oracle: solution/solve.sh runs")
    p.add_argument("--adapter", metavar="NAME", help="pin every turn to this adapter "
                   "instead of routing it")
    _add_engine(p)
    again = p.add_mutually_exclusive_group()
    again.add_argument("--redo", action="store_true", help="rerun finished episodes too")
    again.add_argument("--retry-errors", action="store_true",
                       help="rerun the episodes that ended in error")
    p.add_argument("--no-record", action="store_true",
                   help="keep no trajectories (nothing to replay; for timing the recording)")
    _add_ray(p)
    p.add_argument("--json", action="store_true", help="print each episode as a JSON line, "
                   "then the run's summary")
    p.set_defaults(func=run)

    _add_worker(sub)

    p = sub.add_parser("replay", help="re-drive recorded episodes without model or Docker",
                       description="Replay every recorded episode of RUN with the recorded "
                       "engine replies and tool results, under the run's HCP or --hcp, and "
                       "say per episode whether it stays identical or where it diverges.")
    p.add_argument("run", type=Path, help="the run folder")
    p.add_argument("--hcp", type=Path, help="replay under this HCP (default: the run's)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=replay)

    _configure_affected(sub)

    p = sub.add_parser("show", help="a run's per-task table, pass rate and cost")
    p.add_argument("run", type=Path, help="the run folder")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=show)

    _configure_export(sub)

    p = sub.add_parser("compare", help="two runs side by side, with a sign test")
    p.add_argument("run_a", type=Path, help="the first (baseline) run folder")
    p.add_argument("run_b", type=Path, help="the second run folder")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=compare)


def _configure_affected(sub: Any) -> None:
    p = sub.add_parser("affected", help="the tasks of a run an HCP patch can affect, in three "
                       "tiers (no model, no Docker)",
                       description="Which tasks of RUN the PATCH (RFC 6902, against the run "
                       "HCP's evolve document; see docs/evolve.md) can affect: (1) tasks that "
                       "read none of the touched paths, (2) tasks whose replay under the "
                       "patched HCP stays identical, (3) the others.")
    p.add_argument("--run", type=Path, required=True, help="the run folder")
    p.add_argument("--patch", type=Path, required=True, help="a JSON file holding the patch")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=affected)


def _configure_export(sub: Any) -> None:
    p = sub.add_parser("export", help="a run's episodes as ATIF trajectories, or one "
                       "adapter's training data (chat JSONL)",
                       description="--format atif: one ATIF trajectory (.json, Harbor's "
                       "format) per recorded episode into the folder --out. --format sft: "
                       "chat-format JSONL for training --adapter, one example per answer "
                       "step from its own view as the engine received it (and route "
                       "examples for the router adapter), with a manifest beside it "
                       "(data.jsonl -> data.manifest.json). See docs/eval.md, Exports.")
    p.add_argument("run", type=Path, help="the run folder")
    p.add_argument("--format", required=True, choices=("atif", "sft"), help="what to write")
    p.add_argument("--out", type=Path, required=True, metavar="PATH",
                   help="atif: a folder (made when missing); sft: the JSONL file")
    add_sft_arguments(p)
    p.set_defaults(func=export)


def add_sft_arguments(p: argparse.ArgumentParser) -> None:
    """The options of training-data exports (``mol eval export``, ``mol sessions export``)."""
    p.add_argument("--adapter", metavar="NAME", help="sft: the adapter whose data it is "
                   "(required for sft)")
    p.add_argument("--passed-only", action="store_true",
                   help="sft: only episodes that passed")
    p.add_argument("--min-reward", type=float, metavar="R",
                   help="sft: only episodes with a reward of at least R")
    p.add_argument("--keep-prefixes", action="store_true", help="sft: keep examples whose "
                   "messages are a prefix of another's (by default they are left out)")


def _add_engine(p: argparse.ArgumentParser) -> None:
    """``mol eval run``'s engine options."""
    p.add_argument("--engine-url", help="engine base URL, overriding engine.api_base")
    add_engine_check_argument(p)


def _add_ray(p: argparse.ArgumentParser) -> None:
    """``mol eval run``'s options for running on a Ray cluster."""
    p.add_argument("--ray", nargs="?", const="auto", metavar="ADDRESS",
                   help="run each episode as a Ray task on a node advertising "
                   "mol_sandbox_slot: 'local' (a private Ray here), 'auto' (the default: "
                   "RAY_ADDRESS or this machine's cluster) or HOST:PORT; needs mol-agent[ray]")
    p.add_argument("--node-retries", type=int, default=2, metavar="N",
                   help="with --ray: times an episode lost with its node runs again "
                   "elsewhere before it is an error (default 2)")


def _add_worker(sub: Any) -> None:
    """``mol eval worker``: this machine as a Ray node that runs episodes."""
    p = sub.add_parser("worker", help="make this machine a Ray node that runs episodes",
                       description="Check that Docker answers here (and has the sandbox "
                       "image), then run Ray's 'ray start' in the foreground with "
                       "mol_sandbox_slot=N, joining the head node at --address (or "
                       "starting it, --head). The 'ray start' line is printed first.")
    p.add_argument("--slots", type=int, required=True, metavar="N",
                   help="sandboxes this machine's Docker engine holds at once")
    p.add_argument("--address", metavar="HOST:PORT",
                   help="the head node to join (default: RAY_ADDRESS)")
    p.add_argument("--head", action="store_true", help="start the head node here")
    p.add_argument("--port", type=int, default=6379, help="the head node's port (--head)")
    p.add_argument("--num-cpus", type=int, default=1, metavar="N",
                   help="CPUs Ray may schedule here (episodes take none; default 1)")
    p.add_argument("--node-ip-address", metavar="IP",
                   help="the address other nodes reach this one at (default: Ray's guess)")
    p.add_argument("--temp-dir", metavar="DIR", help="Ray's folder for its session files")
    p.add_argument("--image", default="mol-sandbox:bookworm",
                   help="the sandbox image to check for (default mol-sandbox:bookworm)")
    p.set_defaults(func=worker)


def _print_json(data: Any) -> None:
    print(json.dumps(data, ensure_ascii=False, default=str), flush=True)


def _episode_json(episode: Any) -> dict[str, Any]:
    return {"type": "episode", **episode.row(), "reads": episode.reads}


async def run(args: argparse.Namespace) -> int:
    """Run the suite; print the summary (or JSON lines)."""
    from mol.eval.progress import Progress
    from mol.eval.report import public, show_data, show_text
    from mol.eval.runner import RunOptions, run_suite

    jobs = args.jobs if args.jobs is not None else (0 if args.ray else 1)
    options = RunOptions(args.suite, load_artifact(args.hcp), args.out, jobs,
                         epochs=args.epochs, tasks=args.tasks, agent=args.agent,
                         adapter=args.adapter, engine_url=args.engine_url, redo=args.redo,
                         retry_errors=args.retry_errors, record=not args.no_record,
                         ray=args.ray, node_retries=args.node_retries,
                         engine_check=not args.no_engine_check)
    progress = Progress(0, live=sys.stderr.isatty() and not args.json)
    on_episode = (lambda e: _print_json(_episode_json(e))) if args.json else None
    out = await run_suite(options, progress=progress, on_episode=on_episode)
    data = show_data(out)
    if args.json:
        _print_json({"type": "summary", **public(data)})
    else:
        print(show_text(data))
    return 0


async def worker(args: argparse.Namespace) -> int:
    """Check this machine, then run its Ray node until it is stopped."""
    from mol.eval.cluster.worker import WorkerOptions, serve

    await serve(WorkerOptions(args.slots, args.address, args.head, args.port, args.num_cpus,
                              args.node_ip_address, args.temp_dir, args.image),
                lambda line: print(f"[eval] {line}", file=sys.stderr, flush=True))
    return 0


async def replay(args: argparse.Namespace) -> int:
    """Replay a run; one line per episode (or JSON)."""
    from mol.eval.trajectories.replay import replay_run

    artifact = load_artifact(args.hcp) if args.hcp else None
    results = await replay_run(args.run, artifact)
    counts: dict[str, int] = {}
    for result in results:
        counts[result.verdict] = counts.get(result.verdict, 0) + 1
    if args.json:
        _print_json({"run": str(args.run), "hcp": str(args.hcp) if args.hcp else None,
                     "episodes": [r.to_dict() for r in results], **counts})
        return 0
    for r in results:
        line = f"{r.task} #{r.epoch}: {r.verdict}"
        if r.divergence is not None:
            d = r.divergence
            line += (f" at request {d.request} ({d.hop}, {d.adapter}), {d.where}:\n    "
                     + d.diff.replace("\n", "\n    "))
        elif r.note:
            line += f" ({r.note})"
        print(line)
    print(", ".join(f"{n} {verdict}" for verdict, n in sorted(counts.items())) or "no episodes")
    return 0


def show(args: argparse.Namespace) -> int:
    """Print a run's figures."""
    from mol.eval.report import public, show_data, show_text

    data = show_data(args.run)
    if args.json:
        _print_json(public(data))
    else:
        print(show_text(data))
    return 0


def export(args: argparse.Namespace) -> int:
    """Write a run's ATIF trajectories or one adapter's training data; one line saying what."""
    from mol.core.errors import UsageError
    from mol.eval.exports.source import read_run

    if args.format == "atif":
        from mol.eval.exports.atif import export_atif

        if args.adapter or args.passed_only or args.min_reward is not None or (
                args.keep_prefixes):
            raise UsageError("--adapter, --passed-only, --min-reward and --keep-prefixes are "
                             "options of --format sft")
        source = read_run(args.run)
        written = export_atif(source, args.out)
        skipped = f" ({len(source.unrecorded)} without a trajectory left out)" if (
            source.unrecorded) else ""
        print(f"wrote {len(written)} ATIF trajectories to {args.out}{skipped}")
        return 0
    from mol.eval.exports.examples import manifest_path
    from mol.eval.exports.sft import Filters, export_sft

    if not args.adapter:
        raise UsageError("--format sft needs --adapter NAME (the adapter whose data it is)")
    manifest = export_sft(read_run(args.run), args.adapter, args.out, Filters(
        args.passed_only, args.min_reward, not args.keep_prefixes))
    print(f"wrote {manifest['examples']} examples for {args.adapter} to {args.out} "
          f"(manifest {manifest_path(args.out)})")
    return 0


def compare(args: argparse.Namespace) -> int:
    """Print two runs' paired comparison."""
    from mol.eval.report import compare_data, compare_text

    data = compare_data(args.run_a, args.run_b)
    if args.json:
        _print_json(data)
    else:
        print(compare_text(data))
    return 0


async def affected(args: argparse.Namespace) -> int:
    """Print the slice a patch can affect."""
    import tempfile

    from mol.cli.commands.common import read_patch
    from mol.eval.evolve.document import document, touched
    from mol.eval.evolve.materialize import materialize
    from mol.eval.evolve.slice import compute_slice
    from mol.eval.runner import SNAPSHOT
    from mol.eval.store import Store
    from mol.hcp.changes import patch_document
    from mol.hcp.snapshot import load_snapshot

    operations = read_patch(args.patch)
    with Store(args.run, create=False):  # a run folder, or an error saying it is not one
        pass
    parent = load_snapshot(args.run / SNAPSHOT)
    before = document(parent)
    after = patch_document(before, operations)
    with tempfile.TemporaryDirectory(prefix="mol-affected-") as folder:
        candidate = materialize(parent, after, Path(folder) / "hcp")
        found = await compute_slice(args.run, candidate, touched(before, after))
    if args.json:
        _print_json({"run": str(args.run), "patch": str(args.patch), **found.to_dict()})
        return 0
    counts = found.counts()
    print(f"touched: {', '.join(found.touched) or 'nothing'}")
    print(f"{len(found.tasks)} tasks: {counts['unaffected_by_reads']} unaffected by their "
          f"reads, {counts['unaffected_by_replay']} by replay, {counts['affected']} affected")
    width = max([len(t.task) for t in found.tasks] + [4])
    for t in found.tasks:
        print(f"  {t.task:<{width}}  {'affected' if t.affected else 'unaffected':<10}  "
              f"tier {t.tier}: {t.reason}")
    return 0
