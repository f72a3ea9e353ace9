"""``mol hcp``: validate, digest, export the schema of, diff, patch and import HCP artifacts."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mol.core.errors import UsageError


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``mol hcp`` subcommands."""
    sub = parser.add_subparsers(dest="hcp_command", metavar="SUBCOMMAND", required=True)

    p = sub.add_parser("validate", help="check an artifact; print its digest when valid")
    p.add_argument("file", type=Path, help="the HCP TOML file")
    p.set_defaults(func=validate)

    p = sub.add_parser("digest", help="print an artifact's sha256 digest")
    p.add_argument("file", type=Path, help="the HCP TOML file")
    p.add_argument("--behaviour", action="store_true", help="print the behaviour digest instead "
                   "(deployment fields left out; what eval results are keyed by)")
    p.set_defaults(func=digest)

    p = sub.add_parser("schema", help="print the HCP JSON Schema")
    p.add_argument("--markdown", action="store_true", help="print the field reference instead")
    p.set_defaults(func=schema)

    p = sub.add_parser("diff", help="list the key paths and files that differ between A and B")
    p.add_argument("a", type=Path, help="the first artifact")
    p.add_argument("b", type=Path, help="the second artifact")
    p.set_defaults(func=diff)

    p = sub.add_parser("patch", help="apply an RFC 6902 JSON Patch; the result's parent is FILE")
    p.add_argument("file", type=Path, help="the HCP TOML file")
    p.add_argument("patch", type=Path, help="a JSON file holding the patch (an array of ops)")
    p.add_argument("-o", "--output", type=Path, help="write the new artifact here (default: stdout)")
    p.set_defaults(func=patch)

    p = sub.add_parser("import", help="write a new artifact from a Claude Code project, a "
                                      "Codex config.toml or a reference MoL proxy profile, "
                                      "with a report of what was mapped")
    p.add_argument("--from", dest="source", required=True, nargs=2, metavar=("KIND", "PATH"),
                   help="'claude DIR' (a Claude Code project), 'codex FILE' (a config.toml) "
                        "or 'mol-harness DIR' (a reference MoL proxy profile folder: lora.md, "
                        "route.md, intro.md, summary.md, used as they are)")
    p.add_argument("--base-model", help="with mol-harness: the base model ({{BASE_MODEL}}) "
                                        "when the folder is not one of the reference's models")
    p.add_argument("--base", type=Path, help="the artifact to start from (default: the built-in "
                                             "venti example, prompts inlined)")
    p.add_argument("-o", "--output", type=Path, help="write the new artifact here (default: stdout)")
    p.set_defaults(func=import_)


def validate(args: argparse.Namespace) -> int:
    from mol.hcp.loader import load

    artifact = load(args.file)
    for warning in artifact.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"{args.file}: valid ({artifact.name}) {artifact.digest}")
    return 0


def digest(args: argparse.Namespace) -> int:
    from mol.hcp.loader import load

    artifact = load(args.file)
    print(artifact.behaviour_digest if args.behaviour else artifact.digest)
    return 0


def schema(args: argparse.Namespace) -> int:
    from mol.hcp.export import json_schema_text, markdown_reference

    sys.stdout.write(markdown_reference() if args.markdown else json_schema_text())
    return 0


def diff(args: argparse.Namespace) -> int:
    from mol.hcp.changes import diff as compare
    from mol.hcp.loader import load

    a, b = load(args.a), load(args.b)
    changes = compare(a, b)
    for change in changes:
        print(change)
    if not changes:
        print("no differences in meaning" + (" (same digest)" if a.digest == b.digest else ""))
    return 0


def patch(args: argparse.Namespace) -> int:
    from mol.cli.commands.common import read_patch
    from mol.hcp.changes import apply_patch, to_toml
    from mol.hcp.loader import load

    artifact = load(args.file)
    new = apply_patch(artifact, read_patch(args.patch))
    if args.output is None:
        sys.stdout.write(to_toml(new))
    else:
        args.output.write_text(to_toml(new, out_dir=args.output.parent), encoding="utf-8")
        print(f"{args.output}: {new.digest} (parent {artifact.digest})", file=sys.stderr)
    return 0


def import_(args: argparse.Namespace) -> int:
    from mol.hcp import importer
    from mol.hcp.changes import to_toml

    kind, source = args.source
    readers = {"claude": importer.from_claude, "codex": importer.from_codex}
    if kind not in (*readers, "mol-harness"):
        raise UsageError(f"--from {kind!r}: give 'claude DIR', 'codex FILE' or "
                         "'mol-harness DIR'")
    out_dir = (args.output.parent if args.output else Path.cwd()).resolve()
    if kind == "mol-harness":
        from mol.hcp.harness import from_harness

        imported = from_harness(Path(source), out_dir, args.base_model)
    else:
        imported = readers[kind](Path(source), out_dir, args.base or importer.BASE)
    for line in imported.mapped:
        print(f"mapped: {line}", file=sys.stderr)
    for line in imported.not_mapped:
        print(f"not mapped: {line}", file=sys.stderr)
    text = to_toml(imported.artifact)
    if args.output is None:
        sys.stdout.write(text)
    else:
        args.output.write_text(text, encoding="utf-8")
        print(f"{args.output}: {imported.artifact.digest}", file=sys.stderr)
    return 0
