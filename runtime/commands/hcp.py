"""``mol hcp``: validate, digest, export the schema of, diff and patch HCP artifacts."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mol.runtime.errors import UsageError


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``mol hcp`` subcommands."""
    sub = parser.add_subparsers(dest="hcp_command", metavar="SUBCOMMAND", required=True)

    p = sub.add_parser("validate", help="check an artifact; print its digest when valid")
    p.add_argument("file", type=Path, help="the HCP TOML file")
    p.set_defaults(func=validate)

    p = sub.add_parser("digest", help="print an artifact's sha256 digest")
    p.add_argument("file", type=Path, help="the HCP TOML file")
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


def validate(args: argparse.Namespace) -> int:
    from mol.hcp.loader import load

    artifact = load(args.file)
    print(f"{args.file}: valid ({artifact.name}) {artifact.digest}")
    return 0


def digest(args: argparse.Namespace) -> int:
    from mol.hcp.loader import load

    print(load(args.file).digest)
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
    from mol.hcp.changes import apply_patch, to_toml
    from mol.hcp.loader import load

    artifact = load(args.file)
    try:
        operations = json.loads(args.patch.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read patch {args.patch}: {exc.strerror or exc}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{args.patch}: not valid JSON: {exc}") from exc
    new = apply_patch(artifact, operations)
    if args.output is None:
        sys.stdout.write(to_toml(new))
    else:
        args.output.write_text(to_toml(new, out_dir=args.output.parent), encoding="utf-8")
        print(f"{args.output}: {new.digest} (parent {artifact.digest})", file=sys.stderr)
    return 0
