"""``mol adapters``: the artifact's LoRAs against the running engine: list the versions it
serves, register the missing ones, unload old versions, hash a LoRA (docs/adapters.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from mol.cli.commands.common import add_hcp_argument, load_artifact
from mol.core.errors import UsageError


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``mol adapters`` subcommands."""
    sub = parser.add_subparsers(dest="adapters_command", metavar="SUBCOMMAND", required=True)

    p = sub.add_parser("list", help="each adapter's versioned engine name, LoRA and hash, and "
                       "whether the engine serves that version (and which others)")
    _common(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=list_adapters)

    p = sub.add_parser("register", help="load the adapters' LoRAs the engine does not serve "
                       "yet, under their versioned names (needs engine.lora_api)")
    _common(p)
    p.add_argument("names", nargs="*", metavar="NAME",
                   help="adapters to register (default: every adapter with a lora)")
    p.set_defaults(func=register)

    p = sub.add_parser("unregister", help="unload the adapters' current versions, or with "
                       "--stale the other versions the engine still serves")
    _common(p)
    p.add_argument("names", nargs="*", metavar="NAME",
                   help="adapters to unload (default: every adapter with a lora)")
    p.add_argument("--stale", action="store_true",
                   help="unload the OTHER versions of the adapters the engine lists (left from "
                   "earlier artifacts); a version with requests running or waiting is skipped")
    p.set_defaults(func=unregister)

    p = sub.add_parser("hash", help="the sha256 mol computes for a LoRA file or folder")
    p.add_argument("path", type=Path, metavar="PATH", help="a LoRA file or PEFT folder")
    p.set_defaults(func=hash_lora)


def _common(parser: argparse.ArgumentParser) -> None:
    add_hcp_argument(parser)
    parser.add_argument("--engine-url", help="engine base URL, overriding the artifact's "
                        "engine.api_base (also $MOL_ENGINE_URL)")


async def list_adapters(args: argparse.Namespace) -> int:
    """Print each adapter against the engine's model list."""
    from mol.runtime import LoraClient, survey_loras

    artifact = load_artifact(args.hcp)
    client = LoraClient.from_artifact(artifact, args.engine_url)
    rows, others = survey_loras(artifact, await client.served())
    if args.json:
        print(json.dumps({"engine": client.api_base, "adapters": [_row_json(r) for r in rows],
                          "other_models": others}, indent=2))
        return 0
    for row in rows:
        state = "served" if row.listed else "NOT SERVED"
        print(f"{row.adapter}: {row.engine_name} ({state})")
        if row.path is not None:
            print(f"  lora {row.path}\n  sha256 {row.sha256}")
        if row.other_versions:
            print(f"  other versions served: {', '.join(row.other_versions)}")
    if others:
        print(f"engine models no adapter of {artifact.name}: {', '.join(others)}")
    return 0


def _row_json(row: Any) -> dict[str, Any]:
    return {"adapter": row.adapter, "engine_name": row.engine_name, "lora_path": row.path,
            "sha256": row.sha256, "served": row.listed,
            "other_versions": list(row.other_versions)}


async def register(args: argparse.Namespace) -> int:
    """Register the missing LoRAs, one line each; the engine's refusal is the error."""
    from mol.runtime import lora_client, register_loras

    artifact = load_artifact(args.hcp)
    client = lora_client(artifact, args.engine_url)
    for name, state in await register_loras(artifact, client, args.names or None):
        print(f"{name}: {'registered' if state == 'registered' else 'already registered'}",
              flush=True)
    return 0


async def unregister(args: argparse.Namespace) -> int:
    """Unload the named adapters' current versions, or their stale ones, one line each."""
    from mol.runtime import lora_client, unregister_loras

    artifact = load_artifact(args.hcp)
    client = lora_client(artifact, args.engine_url)
    done = await unregister_loras(artifact, client, args.names or None, stale=args.stale)
    for name, state in done:
        if state == "in use":
            print(f"{name}: skipped, the engine reports requests running or waiting for it",
                  flush=True)
        else:
            print(f"{name}: {state}", flush=True)
    if args.stale and not done:
        print("no stale versions served")
    return 0


def hash_lora(args: argparse.Namespace) -> int:
    """Print the LoRA's content hash (``lora = { sha256 = ... }``)."""
    from mol.hcp.loras import content_sha256

    if not args.path.exists():
        raise UsageError(f"{args.path}: no such file or folder")
    print(content_sha256(args.path.resolve()))
    return 0
